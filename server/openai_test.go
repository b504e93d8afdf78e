package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"marspec/api"
)

// openAIClient is the official OpenAI Go client pointed at ts, with key as its API key.
func openAIClient(ts *testServer, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(ts.http.URL+openAIPrefix), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// The official client makes PNGs of the class its prompt names, with the server's key as
// its API key, and lists the served pack as its model.
func TestOpenAIClientGeneratesPNG(t *testing.T) {
	ts := start(t, "", false, func(c *Config) { c.Token = "s3cret" })
	client := openAIClient(ts, "s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	models, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(models.Data) != 1 || models.Data[0].ID != "analytic-target" || models.Data[0].Object != "model" {
		t.Fatalf("models: %+v", models.Data)
	}
	res, err := client.Images.Generate(ctx, openai.ImageGenerateParams{Prompt: "trouser", N: openai.Int(2),
		Model: openai.ImageModel(models.Data[0].ID), Size: openai.ImageGenerateParamsSize(packSize(ts.cat))})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 || res.Created == 0 {
		t.Fatalf("%d images, created %d", len(res.Data), res.Created)
	}
	for i, d := range res.Data {
		raw, err := base64.StdEncoding.DecodeString(d.B64JSON)
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("image %d is no PNG: %v", i, err)
		}
		man := ts.cat.Target
		if b := img.Bounds(); b.Dx() != man.Image.Width || b.Dy() != man.Image.Height {
			t.Errorf("image %d is %v, the pack's size is %dx%d", i, b, man.Image.Width, man.Image.Height)
		}
		if d.RevisedPrompt != "Trouser" {
			t.Errorf("image %d: revised_prompt %q, want the class name Trouser", i, d.RevisedPrompt)
		}
	}

	wrong := openAIClient(ts, "wrong")
	_, err = wrong.Images.Generate(ctx, openai.ImageGenerateParams{Prompt: "trouser"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
		t.Fatalf("a wrong key: %v", err)
	}
}

// openAIErrorAnswer decodes an OpenAI-shaped error strictly: exactly error.{message, type,
// param, code}, no marspec fields.
func openAIErrorAnswer(t *testing.T, a answer) openAIErrorDetail {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(a.body, &top); err != nil || len(top) != 1 || top["error"] == nil {
		t.Fatalf("%d %s: not OpenAI's error shape", a.code, a.body)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(top["error"], &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := fields[k]; !ok || len(fields) != 4 {
			t.Fatalf("%s: error has not exactly message, type, param, code", a.body)
		}
	}
	var d openAIErrorDetail
	if err := json.Unmarshal(top["error"], &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// The same request by plain HTTP answers data[0].b64_json; with response_format url, an
// address of the stored PNG on this server; the job is one of marspec's own.
func TestOpenAIPlainHTTP(t *testing.T) {
	ts := start(t, "", false, nil)
	a := ts.call(t, "POST", "/openai/v1/images/generations", `{"prompt": "1", "quality": "hd"}`)
	if a.code != http.StatusOK {
		t.Fatalf("%d %s", a.code, a.body)
	}
	var out openAIImages
	if err := json.Unmarshal(a.body, &out); err != nil || len(out.Data) != 1 {
		t.Fatalf("%s: %v", a.body, err)
	}
	raw, err := base64.StdEncoding.DecodeString(out.Data[0].B64JSON)
	if err == nil {
		_, err = png.Decode(bytes.NewReader(raw))
	}
	if err != nil {
		t.Fatalf("data[0].b64_json: %v", err)
	}
	var g api.Generation
	job := ts.call(t, "GET", a.header.Get("Location"), "")
	if err := json.Unmarshal(job.body, &g); err != nil || g.Settings.Preset != "quality" || g.Settings.ClassNames[0] != "Trouser" {
		t.Fatalf("the job behind it (quality hd runs the preset quality): %d %s", job.code, job.body)
	}

	a = ts.call(t, "POST", "/openai/v1/images/generations", `{"prompt": "Pullover", "response_format": "url", "preset": "fast", "user": "u1"}`)
	out = openAIImages{}
	if err := json.Unmarshal(a.body, &out); err != nil || a.code != http.StatusOK || len(out.Data) != 1 || out.Data[0].B64JSON != "" {
		t.Fatalf("%d %s", a.code, a.body)
	}
	u := out.Data[0].URL
	if !strings.HasPrefix(u, ts.http.URL+"/v1/images/") {
		t.Fatalf("url %q is not this server's image", u)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := png.Decode(resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
	}
}

// Bad input is a 400 in OpenAI's shape, param naming the field and the message what is allowed.
func TestOpenAIBadInput(t *testing.T) {
	ts := start(t, "", false, nil)
	size := packSize(ts.cat)
	for _, c := range []struct{ body, param, says string }{
		{`{"prompt": "a cat"}`, "prompt", "Trouser"},
		{`{"prompt": ""}`, "prompt", "required"},
		{`{"prompt": "9"}`, "prompt", "0 to 2"},
		{`{"prompt": "Trouser", "size": "1024x1024"}`, "size", size},
		{`{"prompt": "Trouser", "response_format": "gif"}`, "response_format", "b64_json, url"},
		{`{"prompt": "Trouser", "quality": "ultra"}`, "quality", "standard"},
		{`{"prompt": "Trouser", "model": "dall-e-3"}`, "model", "analytic-target"},
		{`{"prompt": "Trouser", "n": 1000}`, "n", ""},
		{`{"prompt": "Trouser", "output_format": "jpeg"}`, "output_format", "png"},
		{`{"prompt": "Trouser", "background": "transparent"}`, "background", "unknown field"},
		{`{"prompt": "Trouser", "preset": "nope"}`, "preset", "fast"},
	} {
		a := ts.call(t, "POST", "/openai/v1/images/generations", c.body)
		d := openAIErrorAnswer(t, a)
		if a.code != http.StatusBadRequest || d.Type != "invalid_request_error" || d.Param == nil || *d.Param != c.param ||
			!strings.Contains(d.Message, c.says) {
			t.Errorf("%s: %d %s", c.body, a.code, a.body)
		}
	}
	a := ts.call(t, "POST", "/openai/v1/images/generations", `{"prompt": `)
	if d := openAIErrorAnswer(t, a); a.code != http.StatusBadRequest || d.Param != nil {
		t.Errorf("malformed JSON: %d %s", a.code, a.body)
	}
	a = ts.call(t, "POST", "/openai/v1/chat/completions", `{}`)
	if d := openAIErrorAnswer(t, a); a.code != http.StatusNotFound || d.Code == nil || *d.Code != "not_found" {
		t.Errorf("a route the adapter lacks: %d %s", a.code, a.body)
	}
	a = ts.call(t, "GET", "/openai/v1/images/generations", "")
	if openAIErrorAnswer(t, a); a.code != http.StatusMethodNotAllowed {
		t.Errorf("GET on the POST route: %d %s", a.code, a.body)
	}
	if a := ts.call(t, "POST", "/v1/generations", `{"class": "a cat"}`); !strings.HasPrefix(string(a.body), `{"error":"class`) {
		t.Errorf("marspec's own routes keep their shape: %s", a.body)
	}
}

// A job still running when --max-wait passes is a 504 that tells the SDKs not to post it
// again, naming the job, which goes on.
func TestOpenAIWaitsUpToMaxWait(t *testing.T) {
	ts := start(t, "", true, func(c *Config) { c.MaxWait = 200 * time.Millisecond })
	a := ts.call(t, "POST", "/openai/v1/images/generations", `{"prompt": "Trouser", "n": 2}`)
	d := openAIErrorAnswer(t, a)
	id := strings.TrimPrefix(a.header.Get("Location"), "/v1/generations/")
	if a.code != http.StatusGatewayTimeout || a.header.Get("x-should-retry") != "false" || d.Code == nil || *d.Code != "timeout" ||
		id == "" || !strings.Contains(d.Message, id) {
		t.Fatalf("%d %v %s", a.code, a.header, a.body)
	}
	ts.gate.release()
	if g := ts.waitEnd(t, id); g.Status != api.StatusSucceeded || len(g.Images) != 2 {
		t.Fatalf("the job after the 504: %s, %d images", g.Status, len(g.Images))
	}
}
