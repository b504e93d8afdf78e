package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"marspec/api"
)

// liveSpec checks live requests and answers against the served /openapi.json.
type liveSpec struct {
	t      *testing.T
	ts     *testServer
	router routers.Router
	opts   *openapi3filter.Options
}

// loadLiveSpec loads the served /openapi.json with kin-openapi and validates it as OpenAPI.
func loadLiveSpec(t *testing.T, ts *testServer) *liveSpec {
	t.Helper()
	a := ts.call(t, "GET", "/openapi.json", "")
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(a.body)
	if err != nil {
		t.Fatalf("load /openapi.json: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("/openapi.json is not valid OpenAPI %s: %v", doc.OpenAPI, err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true,
		SkipSettingDefaults: true} // the server fills in its own defaults
	return &liveSpec{t: t, ts: ts, router: router, opts: opts}
}

// check sends a request, validating it and its answer (status, headers, body) against the
// document, and returns the answer.
func (l *liveSpec) check(method, path, body string) answer {
	l.t.Helper()
	ctx := context.Background()
	req, err := http.NewRequest(method, l.ts.http.URL+path, strings.NewReader(body))
	if err != nil {
		l.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	route, params, err := l.router.FindRoute(req)
	if err != nil {
		l.t.Fatalf("%s %s: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: l.opts}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		l.t.Errorf("%s %s: the request does not match the document: %v", method, path, err)
	}
	req.Body = io.NopCloser(strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		l.t.Fatal(err)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: l.opts}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		l.t.Errorf("%s %s: the answer %d does not match the document: %v\n%.400s", method, path, resp.StatusCode, err, got)
	}
	return answer{resp.StatusCode, resp.Header, got}
}

// The served /openapi.json is valid OpenAPI 3.0 (kin-openapi), and the main routes' live
// answers, and the requests that made them, match it, statuses included: a field added to
// an answer in a form OpenAPI 3.0 lacks, or a status left out, fails here.
func TestOpenAPIValidatesLiveAnswers(t *testing.T) {
	openapi3filter.RegisterBodyDecoder("image/png", openapi3filter.FileBodyDecoder)
	ts := start(t, "", false, nil)
	spec := loadLiveSpec(t, ts)

	a := spec.check("POST", "/v1/generations?wait=20s", `{"class": ["Trouser", 2], "n": 2, "cache": null, "preset": "fast", "seed": 7}`)
	var g api.Generation
	if err := json.Unmarshal(a.body, &g); err != nil || a.code != http.StatusOK || len(g.Images) != 4 {
		t.Fatalf("%d %s", a.code, a.body)
	}
	spec.check("POST", "/v1/generations", `{"class": "Trouser", "mode": "target", "cache": {}}`)
	spec.check("POST", "/v1/generations", `{"class": "a cat"}`)
	spec.check("GET", "/v1/generations/"+g.ID, "")
	spec.check("GET", "/v1/generations?limit=5", "")
	spec.check("GET", "/v1/generations?after=", "")
	spec.check("GET", "/v1/generations/"+g.ID+"/grid.png", "")
	spec.check("GET", g.Images[0].URL, "")
	spec.check("GET", "/v1/generations/00000000-0000-0000-0000-000000000000", "")
	spec.check("GET", "/v1/models", "")
	spec.check("GET", "/v1/keys", "")
	spec.check("GET", "/healthz", "")
	spec.check("GET", "/readyz", "")
	spec.check("GET", "/openai/v1/models", "")
	spec.check("POST", "/openai/v1/images/generations", `{"prompt": "Pullover", "n": 2, "quality": "standard", "response_format": "url"}`)
	spec.check("POST", "/openai/v1/images/generations", `{"prompt": "Pullover", "size": "1024x1024"}`)
	spec.check("DELETE", "/v1/generations/"+g.ID, "")
}
