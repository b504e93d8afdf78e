package generation

import (
	"bytes"
	"strings"
	"testing"

	"marspec/api"
)

// The distilled sampler's settings are checked with field errors that name what is allowed:
// the trained step counts, guidance up to the trained scale, no annealing, no eta, no spec mode
// (its last step is a point mass), and a pack that has the head; a temperature scales its
// input noise, so any the request allows fits.
func TestValidateDistilled(t *testing.T) {
	_, cat := TestModelsWithDistilled()
	d := "distilled"
	checkFieldErrors(t, cat, []fieldCase{
		{"untrained step count", "steps", "1, 2, 4", api.GenerateRequest{Mode: ModeTarget, Sampler: d, Steps: i(3)}},
		{"pack default steps", "steps", "1, 2, 4", api.GenerateRequest{Mode: ModeTarget, Sampler: d}},
		{"preset's steps", "preset", "set steps explicitly", api.GenerateRequest{Preset: "quality", Sampler: d}},
		{"cfg above the trained range", "cfg", "1 to 4", api.GenerateRequest{Mode: ModeTarget, Sampler: d, Steps: i(4), CFG: f64(4.5)}},
		{"annealing", "steps_late", "0", api.GenerateRequest{Mode: ModeTarget, Sampler: d, Steps: i(4), StepsLate: i(2)}},
		{"eta", "eta", "ddim", api.GenerateRequest{Mode: ModeTarget, Sampler: d, Steps: i(4), Eta: f64(0.5)}},
		{"spec mode", "sampler", "ddpm", api.GenerateRequest{Mode: ModeSpec, Sampler: d, Steps: i(4)}},
		{"draft pack has none", "sampler", "ddpm, ddim", api.GenerateRequest{Mode: ModeDraft, Sampler: d, Steps: i(4)}},
	})
	for _, ok := range []api.GenerateRequest{
		{Mode: ModeTarget, Sampler: d, Steps: i(1)},
		{Mode: ModeTarget, Sampler: d, Steps: i(2), CFG: f64(3)},
		{Mode: ModeTarget, Sampler: d, Steps: i(1), Temperature: f64(0.9)},
		{Preset: "fast", Sampler: d, Steps: i(4), CFG: f64(4)},
	} {
		ok.Class, ok.Seed = api.Classes{"0"}, u64(1)
		if _, err := Validate(ok, cat); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// A distilled run is deterministic, differs from ddpm's and from another step count, and its
// provenance and settings record the sampler and steps.
func TestDistilledRunsAndIsRecorded(t *testing.T) {
	models, cat := TestModelsWithDistilled()
	run := func(sampler string, steps int) ([]byte, Plan) {
		p, err := Validate(api.GenerateRequest{Class: api.Classes{"1"}, Seed: u64(9), Mode: ModeTarget, Sampler: sampler,
			Steps: i(steps), CFG: f64(3)}, cat)
		if err != nil {
			t.Fatal(err)
		}
		imgs, err := Run(t.Context(), p, models, 0)
		if err != nil {
			t.Fatal(err)
		}
		return imgs[0].Pixels, p
	}
	ddpm, _ := run("", 4)
	a, p := run("distilled", 4)
	b, _ := run("distilled", 4)
	one, _ := run("distilled", 1)
	if !bytes.Equal(a, b) {
		t.Error("same seed gave different pixels")
	}
	if bytes.Equal(a, ddpm) || bytes.Equal(a, one) {
		t.Error("distilled at 4 steps equals ddpm or distilled at 1 step: the sampler or its steps were not used")
	}
	if !strings.Contains(p.Params(), "steps=4") || !strings.Contains(p.Params(), "sampler=distilled") || p.Settings().Sampler != "distilled" {
		t.Errorf("params %q / settings %q do not record it", p.Params(), p.Settings().Sampler)
	}
}

// Scoring runs and the frontier name head samplers in configurations, checked as requests.
func TestRunConfigDistilled(t *testing.T) {
	_, cat := TestModelsWithDistilled()
	rc, err := ParseRunConfig("target:num_iter=3:steps=2:sampler=distilled", runBase(), cat)
	if err != nil || rc.Name != "target-it3-s2-distilled" || rc.Plan.Options.Sampler != "distilled" || rc.Plan.Options.Steps != 2 {
		t.Errorf("got %q %+v (%v)", rc.Name, rc.Plan.Options, err)
	}
	if _, err := ParseRunConfig("target:steps=3:sampler=distilled", runBase(), cat); Field(err) != "steps" {
		t.Errorf("untrained steps in a configuration: %v, want a steps field error", err)
	}
}

// A configuration's temperature sets its own point (over the run's), names its folder and is
// carried into the preset tuned from it; a temperature no request allows is refused as one.
func TestRunConfigTemperature(t *testing.T) {
	_, cat := TestModelsWithDistilled()
	text := "target:num_iter=3:steps=1:sampler=distilled:temperature=0.9"
	rc, err := ParseRunConfig(text, runBase(), cat)
	if err != nil || rc.Name != "target-it3-s1-distilled-temp0.9" || rc.Plan.Options.Temperature != 0.9 {
		t.Fatalf("got %q %+v (%v)", rc.Name, rc.Plan.Options, err)
	}
	p, err := PresetFromRunConfig(text)
	if err != nil || p.Temperature == nil || *p.Temperature != 0.9 || p.Sampler != "distilled" {
		t.Errorf("preset from %s: %+v %v", text, p, err)
	}
	if p, _ := PresetFromRunConfig("target:num_iter=3"); p.Temperature != nil {
		t.Errorf("a configuration without a temperature must leave the preset's unset: %v", *p.Temperature)
	}
	if _, err := ParseRunConfig("target:temperature=9", runBase(), cat); Field(err) != "temperature" {
		t.Errorf("temperature 9: %v, want a temperature field error", err)
	}
}
