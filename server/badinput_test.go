package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"marspec/api"
)

// Every malformed input is a 4xx whose JSON body names the field at fault, and the server
// keeps serving afterwards.
func TestBadInputs(t *testing.T) {
	ts := start(t, "", false, func(c *Config) { c.BodyLimit = 2048 })
	const job = "/v1/generations"
	ok := `{"class":0,"mode":"target"}`
	cases := []struct {
		name, method, path, body string
		code                     int
		field                    string
	}{
		{"malformed JSON", "POST", job, `{"class":`, 400, "body"},
		{"not an object", "POST", job, `[1,2]`, 400, "body"},
		{"empty body", "POST", job, ``, 400, "body"},
		{"two objects", "POST", job, ok + ok, 400, "body"},
		{"trailing garbage", "POST", job, ok + `x`, 400, "body"},
		{"unknown field", "POST", job, `{"class":0,"clas":1}`, 400, "clas"},
		{"n as a string", "POST", job, `{"class":0,"n":"3"}`, 400, "n"},
		{"n fractional", "POST", job, `{"class":0,"n":1.5}`, 400, "n"},
		{"n negative", "POST", job, `{"class":0,"n":-2}`, 400, "n"},
		{"n huge", "POST", job, `{"class":0,"n":1000000000000}`, 400, "n"},
		{"n beyond int64", "POST", job, `{"class":0,"n":1e30}`, 400, "n"},
		{"seed negative", "POST", job, `{"class":0,"seed":-1}`, 400, "seed"},
		{"seed too big", "POST", job, `{"class":0,"seed":18446744073709551615}`, 400, "seed"},
		{"seed a string", "POST", job, `{"class":0,"seed":"1"}`, 400, "seed"},
		{"cfg NaN literal", "POST", job, `{"class":0,"cfg":NaN}`, 400, "body"},
		{"cfg NaN string", "POST", job, `{"class":0,"cfg":"NaN"}`, 400, "cfg"},
		{"cfg zero", "POST", job, `{"class":0,"cfg":0}`, 400, "cfg"},
		{"cfg huge", "POST", job, `{"class":0,"cfg":1e308}`, 400, "cfg"},
		{"cfg overflow", "POST", job, `{"class":0,"cfg":1e999}`, 400, "cfg"},
		{"temperature negative", "POST", job, `{"class":0,"temperature":-1}`, 400, "temperature"},
		{"temperature zero", "POST", job, `{"class":0,"temperature":0}`, 400, "temperature"},
		{"steps negative", "POST", job, `{"class":0,"steps":-3}`, 400, "steps"},
		{"num_iter huge", "POST", job, `{"class":0,"mode":"target","num_iter":99999}`, 400, "num_iter"},
		{"gamma word", "POST", job, `{"class":0,"gamma":"many"}`, 400, "gamma"},
		{"gamma object", "POST", job, `{"class":0,"gamma":{}}`, 400, "gamma"},
		{"prefill > 1", "POST", job, `{"class":0,"prefill":2}`, 400, "prefill"},
		{"max tries 0", "POST", job, `{"class":0,"max_resample_tries":0}`, 400, "max_resample_tries"},
		{"align a string", "POST", job, `{"class":0,"align":"yes"}`, 400, "align"},
		{"no class", "POST", job, `{"n":2}`, 400, "class"},
		{"unknown class", "POST", job, `{"class":"dragon"}`, 400, "class"},
		{"class out of range", "POST", job, `{"class":3}`, 400, "class"},
		{"class negative", "POST", job, `{"class":-1}`, 400, "class"},
		{"class fractional", "POST", job, `{"class":1.5}`, 400, "class"},
		{"class object", "POST", job, `{"class":{"id":1}}`, 400, "class"},
		{"too many images", "POST", job, `{"class":"all","n":30}`, 400, "n"},
		{"unknown mode", "POST", job, `{"class":0,"mode":"turbo"}`, 400, "mode"},
		{"unknown preset", "POST", job, `{"class":0,"preset":"ultra"}`, 400, "preset"},
		{"spec option in target mode", "POST", job, `{"class":0,"mode":"target","gamma":4}`, 400, "gamma"},
		{"oversized body", "POST", job, `{"class":0,"mode":"` + strings.Repeat("x", 4096) + `"}`, 413, ""},
		{"bad wait", "POST", job + "?wait=forever", ok, 400, "wait"},
		{"negative wait", "POST", job + "?wait=-1s", ok, 400, "wait"},
		{"wait beyond the bound", "POST", job + "?wait=1h", ok, 400, "wait"},
		{"bad id", "GET", job + "/not-a-uuid", "", 400, "id"},
		{"upper-case id", "GET", job + "/0E0C7C1A-7D43-4B0B-9E55-6E4B2D3A1F00", "", 400, "id"},
		{"unknown id", "GET", job + "/0e0c7c1a-7d43-4b0b-9e55-6e4b2d3a1f00", "", 404, ""},
		{"bad id events", "GET", job + "/x/events", "", 400, "id"},
		{"unknown id events", "GET", job + "/0e0c7c1a-7d43-4b0b-9e55-6e4b2d3a1f00/events", "", 404, ""},
		{"bad id delete", "DELETE", job + "/..", "", 400, "id"},
		{"unknown id delete", "DELETE", job + "/0e0c7c1a-7d43-4b0b-9e55-6e4b2d3a1f00", "", 404, ""},
		{"traversal image", "GET", "/v1/images/..%2f..%2fmarspec.db", "", 404, ""},
		{"dotted image", "GET", "/v1/images/..png", "", 400, "id"},
		{"image without index", "GET", "/v1/images/0e0c7c1a-7d43-4b0b-9e55-6e4b2d3a1f00.png", "", 400, "id"},
		{"unknown image", "GET", "/v1/images/0e0c7c1a-7d43-4b0b-9e55-6e4b2d3a1f00-0.png", "", 404, ""},
		{"list limit 0", "GET", job + "?limit=0", "", 400, "limit"},
		{"list limit word", "GET", job + "?limit=ten", "", 400, "limit"},
		{"list offset negative", "GET", job + "?offset=-1", "", 400, "offset"},
		{"list unknown class", "GET", job + "?class=dragon", "", 400, "class"},
		{"list class all", "GET", job + "?class=all", "", 400, "class"},
		{"list unknown mode", "GET", job + "?mode=fast", "", 400, "mode"},
		{"list unknown status", "GET", job + "?status=done", "", 400, "status"},
		{"unknown route", "GET", "/v2/anything", "", 404, ""},
		{"wrong method", "PUT", job, ok, 405, ""},
	}
	for _, c := range cases {
		a := ts.call(t, c.method, c.path, c.body, "Content-Type", "application/json")
		var body api.ErrorBody
		err := json.Unmarshal(a.body, &body)
		if a.code != c.code || err != nil || body.Error == "" || body.Field != c.field {
			t.Errorf("%s: %d %s; want %d naming field %q", c.name, a.code, a.body, c.code, c.field)
		}
		if c.field != "" && !strings.Contains(body.Error, c.field) && c.field != "body" {
			t.Errorf("%s: message %q does not name %q", c.name, body.Error, c.field)
		}
	}
	// A 405 says which methods the path has, in the Allow header and the message.
	for path, want := range map[string]string{job: "GET, POST", job + "/0e0c7c1a-7d43-4b0b-9e55-6e4b2d3a1f00": "DELETE, GET",
		"/healthz": "GET"} {
		req, _ := http.NewRequest("PATCH", ts.http.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != want {
			t.Errorf("PATCH %s: %d, Allow %q; want 405 with Allow %q", path, resp.StatusCode, resp.Header.Get("Allow"), want)
		}
	}
	// Still serving, and none of the bad requests left a job behind.
	a := ts.call(t, "POST", job+"?wait=10s", ok)
	if a.code != http.StatusOK {
		t.Fatalf("after bad inputs: %d %s", a.code, a.body)
	}
	list, err := ts.client.List(t.Context(), api.ListOptions{})
	if err != nil || list.Total != 1 {
		t.Fatalf("jobs stored: %+v %v", list, err)
	}
}
