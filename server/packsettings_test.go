package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"marspec/api"
	"marspec/generation"
	"marspec/mar"
	"marspec/store"
)

// A server whose target pack carries its own settings answers with them: GET /v1/models and
// /openapi.json show that pack's presets, default preset and defaults; the default request
// runs the pack's default preset; a preset the pack lacks is a 400 naming the pack's presets.
func TestServerUsesThePacksSettings(t *testing.T) {
	models, cat := generation.TestModels()
	cfgv, temp := 2.9, 1.0
	man := *cat.Target
	man.Settings = &mar.Settings{DefaultPreset: "paper", EvaluationPreset: "paper",
		Defaults: mar.Defaults{CFG: 2.9, CFGSchedule: "linear", Temperature: 1, Provenance: "published: test"},
		Presets: map[string]mar.Preset{
			"paper": {Mode: "target", NumIter: 6, Steps: 8, CFG: &cfgv, Temperature: &temp, About: "paper", Provenance: "published: test"},
			"speed": {Mode: "target", NumIter: 2, Steps: 8, About: "speed", Provenance: "published: test"},
		}}
	cat.Target = &man
	models["target"].Manifest = &man
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := New(testConfig(), Deps{Catalog: cat, Models: models, Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts := &testServer{Server: s}
	ts.http = httptest.NewServer(s.Handler())
	if ts.client, err = api.NewClient(ts.http.URL, "", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.stop(t) })

	m, err := ts.client.Models(t.Context())
	if err != nil || strings.Join(m.Presets, ",") != "paper,speed" || m.DefaultPreset != "paper" || m.Models[0].Defaults == nil ||
		m.Models[0].Defaults.CFG != 2.9 || m.PresetInfo["paper"].Provenance != "published: test" || !m.PresetInfo["paper"].Evaluation {
		t.Fatalf("models: %+v %v", m, err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum    []string `json:"enum"`
					Default any      `json:"default"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	a := ts.call(t, "GET", "/openapi.json", "")
	if err := json.Unmarshal(a.body, &doc); a.code != 200 || err != nil {
		t.Fatalf("openapi: %d %v", a.code, err)
	}
	props := doc.Components.Schemas["GenerateRequest"].Properties
	if strings.Join(props["preset"].Enum, ",") != "paper,speed" || props["preset"].Default != "paper" || props["cfg"].Default != 2.9 {
		t.Errorf("openapi.json request: preset %+v, cfg default %v; want the pack's presets and cfg 2.9", props["preset"], props["cfg"].Default)
	}

	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}}, 0)
	if err != nil || g.Settings.Preset != "paper" || g.Settings.CFG != 2.9 || g.Settings.NumIter != 6 {
		t.Fatalf("default request: %+v %v", g, err)
	}
	a = ts.call(t, "POST", "/v1/generations", `{"class":0,"preset":"fast"}`)
	var body api.ErrorBody
	_ = json.Unmarshal(a.body, &body)
	if a.code != 400 || body.Field != "preset" || !strings.Contains(body.Error, "allowed: paper, speed") {
		t.Fatalf("a preset the pack lacks: %d %s", a.code, a.body)
	}
}
