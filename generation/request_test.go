package generation

import (
	"math"
	"strings"
	"testing"

	"marspec/api"
	"marspec/arsampler"
	"marspec/diffusion"
	"marspec/mar"
)

// The settings only the CLI and offline runs give (self-drafting, the lossy knobs, annealing)
// are checked in the same place as the wire's, with the same typed errors.
func TestValidateRequestExtras(t *testing.T) {
	_, cat := TestModels()
	base := func() Request {
		return Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1)}}
	}
	cases := []struct {
		name, field string
		edit        func(*Request)
	}{
		{"tolerance NaN", "tolerance", func(r *Request) { r.Tolerance = f64(math.NaN()) }},
		{"tolerance negative", "tolerance", func(r *Request) { r.Tolerance = f64(-0.1) }},
		{"tolerance huge", "tolerance", func(r *Request) { r.Tolerance = f64(11) }},
		{"rejection", "rejection", func(r *Request) { r.Rejection = "maybe" }},
		{"steps_late negative", "steps_late", func(r *Request) { r.StepsLate = i(-1) }},
		{"steps_late above steps", "steps_late", func(r *Request) { r.Steps = i(5); r.StepsLate = i(6) }},
		{"steps_late in spec mode", "steps_late", func(r *Request) { r.Mode = ModeSpec; r.StepsLate = i(10) }},
		{"self-draft in draft mode", "draft", func(r *Request) { r.Mode = ModeDraft; r.SelfDraft = true }},
		{"tolerance in target mode", "tolerance", func(r *Request) { r.Mode = ModeTarget; r.Tolerance = f64(0.5) }},
	}
	for _, c := range cases {
		req := base()
		c.edit(&req)
		_, err := ValidateRequest(req, cat)
		if Field(err) != c.field {
			t.Errorf("%s: got %v, want a FieldError on %q", c.name, err, c.field)
		}
	}
	req := base()
	req.SelfDraft, req.Rejection, req.Tolerance = true, "target", f64(0.25)
	p, err := ValidateRequest(req, cat)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec
	if !c.SelfDraft || c.Rejection != arsampler.Target || c.Tolerance != 0.25 || c.Schedule != arsampler.Batched {
		t.Fatalf("extras not in the plan: %+v", c)
	}
	for _, want := range []string{"draft=self", "rejection=target", "tolerance=0.25"} {
		if !strings.Contains(p.Params(), want) {
			t.Errorf("params %q lack %q", p.Params(), want)
		}
	}
	req = base()
	req.Mode, req.Steps, req.StepsLate = ModeTarget, i(8), i(3)
	if p, err := ValidateRequest(req, cat); err != nil || p.Options.StepsLate != 3 || !strings.Contains(p.Params(), "steps_late=3") {
		t.Fatalf("steps_late: %v %q", err, p.Params())
	}
	// a plain request's provenance text is unchanged by the extras (stored jobs compare it)
	plain, _ := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1)}, cat)
	for _, absent := range []string{"steps_late", "rejection", "tolerance", "self"} {
		if strings.Contains(plain.Params(), absent) {
			t.Errorf("plain params %q mention %s", plain.Params(), absent)
		}
	}
	if _, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Gamma: "abc"}, cat); err == nil || !strings.Contains(err.Error(), "not a whole number") {
		t.Errorf("gamma abc: %v", err)
	}
}

// The default of a request that names neither preset nor mode is the pack's default preset.
func TestDefaultPreset(t *testing.T) {
	set := EmbeddedSettings()
	mode, preset, _, err := ResolveMode(Request{}, set, "target")
	if err != nil {
		t.Fatal(err)
	}
	if set.DefaultPreset == "" {
		if mode != ModeSpec || preset != "" {
			t.Fatalf("no default preset: mode %q preset %q, want spec and none", mode, preset)
		}
		return
	}
	if preset != set.DefaultPreset || mode != set.Presets[set.DefaultPreset].Mode {
		t.Fatalf("default: mode %q preset %q, want preset %s", mode, preset, set.DefaultPreset)
	}
	// an explicit mode is not overridden by the default preset
	if m, p, _, _ := ResolveMode(Request{GenerateRequest: api.GenerateRequest{Mode: ModeDraft}}, set, "target"); m != ModeDraft || p != "" {
		t.Fatalf("explicit draft mode: %q %q", m, p)
	}
}

// testSettings is a pack's settings with the given presets (provenance filled in).
func testSettings(def string, presets map[string]Preset) *mar.Settings {
	set := &mar.Settings{DefaultPreset: def, Presets: map[string]Preset{},
		Defaults: mar.Defaults{CFG: 1, CFGSchedule: "linear", Temperature: 1, Provenance: "chosen: test"}}
	for name, p := range presets {
		p.About, p.Provenance = "test preset "+name, "chosen: test"
		set.Presets[name] = p
	}
	return set
}

// withSettings is cat whose target pack carries set.
func withSettings(cat Catalog, set *mar.Settings) Catalog {
	man := *cat.Target
	man.Settings = set
	cat.Target = &man
	return cat
}

// How a default preset applies, whatever the pack's is: only to requests naming neither mode
// nor preset, and not to one asking for speculative settings when the default preset runs
// another mode.
func TestDefaultPresetRules(t *testing.T) {
	presets := map[string]Preset{"other": {Mode: ModeTarget, NumIter: 2}, "spec": {Mode: ModeSpec, Acceptance: "exact"}}
	withGamma := Request{GenerateRequest: api.GenerateRequest{Gamma: "4"}}
	for _, c := range []struct {
		req               Request
		def, mode, preset string
	}{
		{Request{}, "other", ModeTarget, "other"},
		{Request{}, "spec", ModeSpec, "spec"},
		{Request{}, "", ModeSpec, ""},
		{withGamma, "other", ModeSpec, ""},
		{withGamma, "spec", ModeSpec, "spec"},
		{Request{GenerateRequest: api.GenerateRequest{Mode: ModeDraft}}, "other", ModeDraft, ""},
		{Request{GenerateRequest: api.GenerateRequest{Preset: "spec"}}, "other", ModeSpec, "spec"},
	} {
		mode, preset, _, err := ResolveMode(c.req, testSettings(c.def, presets), "p")
		if err != nil || mode != c.mode || preset != c.preset {
			t.Errorf("default %s, request %+v: mode %q preset %q (%v), want %q %q", c.def, c.req.GenerateRequest, mode, preset, err, c.mode, c.preset)
		}
	}
}

// A preset's diffusion steps and annealing reach the plan unless the request sets them, and
// pass the same checks.
func TestPresetSteps(t *testing.T) {
	_, cat := TestModels()
	cat = withSettings(cat, testSettings("", map[string]Preset{"test-steps": {Mode: ModeTarget, NumIter: 3, Steps: 8, StepsLate: 4, FinalStepNoise: true}}))
	req := func(edit func(*api.GenerateRequest)) api.GenerateRequest {
		r := api.GenerateRequest{Class: api.Classes{"0"}, Preset: "test-steps"}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	p, err := Validate(req(nil), cat)
	if err != nil || p.Options.NumIter != 3 || p.Options.Steps != 8 || p.Options.StepsLate != 4 || !p.Options.FinalStepNoise {
		t.Fatalf("preset steps: %+v %v", p.Options, err)
	}
	off := false
	if p, err := Validate(req(func(r *api.GenerateRequest) { r.FinalStepNoise = &off }), cat); err != nil || p.Options.FinalStepNoise {
		t.Fatalf("explicit final_step_noise false must win over the preset: %+v %v", p.Options, err)
	}
	if p, err := Validate(req(func(r *api.GenerateRequest) { r.Steps = i(9) }), cat); err != nil || p.Options.Steps != 9 || p.Options.StepsLate != 4 {
		t.Fatalf("explicit steps: %+v %v", p.Options, err)
	}
	if _, err := Validate(req(func(r *api.GenerateRequest) { r.Steps = i(2) }), cat); Field(err) != "preset" || !strings.Contains(err.Error(), "steps_late 4") {
		t.Fatalf("late steps above explicit steps: %v", err)
	}
}

// A preset's sampler and eta reach the plan unless the request names a sampler (which then
// gets the pack's steps, not the preset's); a request the preset's distilled head cannot run
// (no head in the pack, guidance above its training) runs the preset's fallback, named in the
// plan; one the fallback cannot run either keeps its error. A temperature runs on the head (it
// scales the head's input noise).
func TestPresetSamplerAndFallback(t *testing.T) {
	one := 1.0
	set := testSettings("", map[string]Preset{
		"test-distilled": {Mode: ModeTarget, NumIter: 3, Steps: 2, Sampler: "distilled", FinalStepNoise: true, Fallback: "test-ddim"},
		"test-ddim":      {Mode: ModeTarget, NumIter: 3, Steps: 5, Sampler: "ddim", Eta: &one, FinalStepNoise: true}})
	req := func(edit func(*api.GenerateRequest)) api.GenerateRequest {
		r := api.GenerateRequest{Class: api.Classes{"0"}, Preset: "test-distilled"}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	_, withHead := TestModelsWithDistilled()
	withHead = withSettings(withHead, set)
	p, err := Validate(req(nil), withHead)
	if err != nil || p.Preset != "test-distilled" || p.Options.Sampler != diffusion.Distilled || p.Options.Steps != 2 || p.Options.NumIter != 3 {
		t.Fatalf("distilled preset on a pack with the head: %s %+v %v", p.Preset, p.Options, err)
	}
	if p, err := Validate(req(func(r *api.GenerateRequest) { r.Sampler = "ddim" }), withHead); err != nil ||
		p.Options.Sampler != diffusion.DDIM || p.Options.Steps != withHead.Target.Diffusion.SamplingSteps || p.Options.Eta != 0 {
		t.Fatalf("an explicit sampler must take the pack's steps and eta, not the preset's: %+v %v", p.Options, err)
	}
	_, noHead := TestModels()
	noHead = withSettings(noHead, set)
	for name, c := range map[string]struct {
		cat  Catalog
		edit func(*api.GenerateRequest)
	}{
		"pack without a distilled head": {noHead, nil},
		"cfg 5":                         {withHead, func(r *api.GenerateRequest) { v := 5.0; r.CFG = &v }},
	} {
		p, err := Validate(req(c.edit), c.cat)
		if err != nil || p.Preset != "test-ddim" || p.Options.Sampler != diffusion.DDIM || p.Options.Eta != 1 || p.Options.Steps != 5 {
			t.Errorf("%s: want the fallback preset, got %s %+v %v", name, p.Preset, p.Options, err)
		}
	}
	if p, err := Validate(req(func(r *api.GenerateRequest) { r.Temperature = f64(0.9) }), withHead); err != nil ||
		p.Preset != "test-distilled" || p.Options.Sampler != diffusion.Distilled || p.Options.Temperature != 0.9 {
		t.Errorf("temperature 0.9 must run on the head: %s %+v %v", p.Preset, p.Options, err)
	}
	if _, err := Validate(req(func(r *api.GenerateRequest) { r.Steps = i(100000) }), withHead); Field(err) != "steps" {
		t.Errorf("steps no preset can run must be refused as the request's own: %v", err)
	}
	if _, err := Validate(req(func(r *api.GenerateRequest) { r.Sampler = "distilled" }), noHead); Field(err) != "sampler" {
		t.Errorf("an explicit distilled sampler on a pack without the head must be refused: %v", err)
	}
}

// Every preset of the embedded pack runs on a pack without a distilled head (itself or through
// its fallback, which must exist and not need the head), and the default request runs the head
// where the pack has one: the embedded pack's settings are also what a pack without settings
// derives from, so they must serve any pack.
func TestPresetsRunOnEveryPack(t *testing.T) {
	_, noHead := TestModels()
	_, withHead := TestModelsWithDistilled()
	set := EmbeddedSettings()
	for _, name := range set.PresetNames() {
		pre := set.Presets[name]
		if pre.Fallback != "" {
			fb, ok := set.Presets[pre.Fallback]
			if !ok || fb.Sampler == string(diffusion.Distilled) || fb.Fallback != "" {
				t.Errorf("preset %s falls back to %q: want an existing preset that needs no distilled head and has no fallback of its own", name, pre.Fallback)
			}
		}
		if pre.Mode == ModeSpec {
			continue
		}
		for pack, cat := range map[string]Catalog{"without the head": noHead, "with the head": withHead} {
			if _, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Preset: name}, cat); err != nil {
				t.Errorf("preset %s on a pack %s: %v", name, pack, err)
			}
		}
	}
	p, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}}, withHead)
	def := set.Presets[set.DefaultPreset]
	if err != nil || p.Preset != set.DefaultPreset || string(p.Options.Sampler) != def.Sampler && def.Sampler != "" {
		t.Errorf("default request on the pack with the head: preset %q sampler %q (%v), want %s's own", p.Preset, p.Options.Sampler, err, set.DefaultPreset)
	}
	if def.Fallback != "" {
		p, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}}, noHead)
		if err != nil || p.Preset != def.Fallback {
			t.Errorf("default request on a pack without the head: preset %q (%v), want the fallback %s", p.Preset, err, def.Fallback)
		}
	}
}
