package generation

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"marspec/api"
	"marspec/arsampler"
	"marspec/render"
)

func f64(v float64) *float64 { return &v }
func i(v int) *int           { return &v }
func u64(v uint64) *uint64   { return &v }

// Each defect once found in request values by trying bad input, and more: a FieldError naming the
// field, wrapping ErrInvalid, with what is allowed.
func TestValidateRejects(t *testing.T) {
	_, cat := TestModels()
	base := func() api.GenerateRequest { return api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1)} }
	cases := []struct {
		name, field string
		edit        func(*api.GenerateRequest)
	}{
		{"cfg NaN", "cfg", func(r *api.GenerateRequest) { r.CFG = f64(math.NaN()) }},
		{"cfg +Inf", "cfg", func(r *api.GenerateRequest) { r.CFG = f64(math.Inf(1)) }},
		{"cfg 0", "cfg", func(r *api.GenerateRequest) { r.CFG = f64(0) }},
		{"cfg huge", "cfg", func(r *api.GenerateRequest) { r.CFG = f64(1e300) }},
		{"temperature 0", "temperature", func(r *api.GenerateRequest) { r.Temperature = f64(0) }},
		{"temperature NaN", "temperature", func(r *api.GenerateRequest) { r.Temperature = f64(math.NaN()) }},
		{"temperature negative", "temperature", func(r *api.GenerateRequest) { r.Temperature = f64(-1) }},
		{"max tries 0", "max_resample_tries", func(r *api.GenerateRequest) { r.MaxResampleTries = i(0) }},
		{"max tries negative", "max_resample_tries", func(r *api.GenerateRequest) { r.MaxResampleTries = i(-5) }},
		{"n 0 explicit negative", "n", func(r *api.GenerateRequest) { r.N = -1 }},
		{"n huge", "n", func(r *api.GenerateRequest) { r.N = 1 << 30 }},
		{"too many images", "n", func(r *api.GenerateRequest) { r.Class = api.Classes{"all"}; r.N = 30 }},
		{"no class", "class", func(r *api.GenerateRequest) { r.Class = nil }},
		{"unknown class", "class", func(r *api.GenerateRequest) { r.Class = api.Classes{"sneakerz"} }},
		{"class out of range", "class", func(r *api.GenerateRequest) { r.Class = api.Classes{"3"} }},
		{"class negative", "class", func(r *api.GenerateRequest) { r.Class = api.Classes{"-1"} }},
		{"unknown mode", "mode", func(r *api.GenerateRequest) { r.Mode = "fast" }},
		{"unknown preset", "preset", func(r *api.GenerateRequest) { r.Preset = "turbo" }},
		{"preset conflicts with mode", "mode", func(r *api.GenerateRequest) { r.Preset = "exact"; r.Mode = "target" }},
		{"num_iter too big", "num_iter", func(r *api.GenerateRequest) { r.Mode = "target"; r.NumIter = i(7) }},
		{"num_iter in spec mode", "num_iter", func(r *api.GenerateRequest) { r.Mode = ModeSpec; r.NumIter = i(3) }},
		{"steps negative", "steps", func(r *api.GenerateRequest) { r.Steps = i(-1) }},
		{"steps too many", "steps", func(r *api.GenerateRequest) { r.Steps = i(1001) }},
		{"seed too big", "seed", func(r *api.GenerateRequest) { r.Seed = u64(1 << 60) }},
		{"cfg schedule", "cfg_schedule", func(r *api.GenerateRequest) { r.CFGSchedule = "cosine" }},
		{"gamma word", "gamma", func(r *api.GenerateRequest) { r.Gamma = "abc" }},
		{"gamma 0", "gamma", func(r *api.GenerateRequest) { r.Gamma = "0" }},
		{"prefill NaN", "prefill", func(r *api.GenerateRequest) { r.Prefill = f64(math.NaN()) }},
		{"prefill > 1", "prefill", func(r *api.GenerateRequest) { r.Prefill = f64(1.5) }},
		{"verify", "verify", func(r *api.GenerateRequest) { r.Verify = "all" }},
		{"acceptance", "acceptance", func(r *api.GenerateRequest) { r.Acceptance = "loose" }},
		{"schedule", "schedule", func(r *api.GenerateRequest) { r.Schedule = "eager" }},
		{"spec option in target mode", "gamma", func(r *api.GenerateRequest) { r.Mode = "target"; r.Gamma = "4" }},
	}
	for _, c := range cases {
		req := base()
		c.edit(&req)
		_, err := Validate(req, cat)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		var fe *FieldError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: got %v (field %q), want a FieldError on %q", c.name, err, Field(err), c.field)
		}
		if fe != nil && fe.Allowed == "" {
			t.Errorf("%s: %v does not say what is allowed", c.name, err)
		}
	}
}

func TestValidateRuntime(t *testing.T) {
	if err := ValidateRuntime("cpu", -2); Field(err) != "threads" {
		t.Errorf("threads -2: %v", err)
	}
	if err := ValidateRuntime("tpu", 0); Field(err) != "provider" {
		t.Errorf("provider tpu: %v", err)
	}
	if err := ValidateRuntime("cpu", 4); err != nil {
		t.Error(err)
	}
}

func TestClassNamesAndSlugs(t *testing.T) {
	_, cat := TestModels()
	for in, want := range map[string]int{"t-shirt-top": 0, "T-shirt/top": 0, "t-shirt/TOP": 0, "trouser": 1, " 2 ": 2} {
		got, err := ParseClass(cat.Target, in)
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("class %q: got %v, %v; want %d", in, got, err, want)
		}
	}
	var req api.GenerateRequest
	if err := json.Unmarshal([]byte(`{"class":["pullover",1,"all"],"n":2,"seed":3}`), &req); err != nil {
		t.Fatal(err)
	}
	p, err := Validate(req, cat)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{2, 2, 1, 1, 0, 0, 1, 1, 2, 2}
	if len(p.Classes) != len(want) {
		t.Fatalf("classes %v, want %v", p.Classes, want)
	}
	for k := range want {
		if p.Classes[k] != want[k] {
			t.Fatalf("classes %v, want %v", p.Classes, want)
		}
	}
}

func TestDefaultsAndPresets(t *testing.T) {
	_, cat := TestModels()
	// spec mode's own defaults (the default preset, TestDefaultPreset, may run another mode)
	p, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Mode: ModeSpec}, cat)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeSpec || p.Spec == nil || p.Spec.Gamma != 8 || p.Spec.Prefill != 0.05 || !p.Spec.Align ||
		p.Spec.MaxResampleTries != 1000 || p.Spec.Schedule != arsampler.Lazy || p.Options.Temperature != 1 || p.Options.CFG != 1 {
		t.Errorf("defaults: %+v %+v", p, p.Spec)
	}
	if p.Options.Seed > MaxSeed {
		t.Errorf("random seed %d beyond %d", p.Options.Seed, uint64(MaxSeed))
	}
	// a preset's values pass the request's checks: AR steps beyond the 6 tokens of the test
	// packs are refused naming the preset, and an explicit num_iter wins
	long := withSettings(cat, testSettings("", map[string]Preset{"long": {Mode: ModeTarget, NumIter: 7}}))
	for _, name := range long.Target.Settings.PresetNames() {
		pre := long.Target.Settings.Presets[name]
		if pre.Mode == ModeSpec || pre.NumIter <= cat.Target.SeqLen() {
			t.Fatalf("preset %s fits the pack: the check below would test nothing", name)
		}
		_, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Preset: name}, long)
		if Field(err) != "preset" || !strings.Contains(err.Error(), fmt.Sprintf("its num_iter %d does not fit", pre.NumIter)) {
			t.Errorf("%s on a 6-token pack: %v", name, err)
		}
		over, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Preset: name, NumIter: i(2)}, long)
		if err != nil || over.Mode != pre.Mode || over.Options.NumIter != 2 {
			t.Errorf("%s: an explicit num_iter must win over the preset: %+v %v", name, over.Options, err)
		}
	}
	exact, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Preset: "exact"}, cat)
	if err != nil || exact.Spec == nil || exact.Spec.Acceptance.String() != "exact" {
		t.Errorf("exact: %+v %v", exact, err)
	}
	draft, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Mode: "draft"}, cat)
	if err != nil || draft.Pack != "draft" || !strings.Contains(draft.Params(), "mode=draft") || strings.Contains(draft.Params(), "target") {
		t.Errorf("draft mode must be stamped as draft: %q %v", draft.Params(), err)
	}
}

func TestPNGCarriesParameters(t *testing.T) {
	models, cat := TestModels()
	p, err := Validate(api.GenerateRequest{Class: api.Classes{"1"}, Seed: u64(42), N: 2, Mode: ModeSpec}, cat)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := Run(t.Context(), p, models, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 2 || imgs[1].Index != 1 || imgs[1].Spec == nil {
		t.Fatalf("images: %+v", imgs)
	}
	data, err := p.PNG(imgs[1])
	if err != nil {
		t.Fatal(err)
	}
	got := render.ReadParameters(data)
	for _, want := range []string{"mode=spec", "target=target", "draft=draft", "seed=42", "class=1 (Trouser)", "index=1", "alpha=", "gamma=8", "acceptance=paper"} {
		if !strings.Contains(got, want) {
			t.Errorf("parameters %q lack %q", got, want)
		}
	}
}
