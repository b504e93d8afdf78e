package generation

import (
	"errors"
	"strings"
	"testing"

	"marspec/api"
	"marspec/arsampler"
)

func runBase() Request {
	seed, cfg, temp := uint64(1), 1.0, 1.0
	return Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}, Seed: &seed, CFG: &cfg, Temperature: &temp}}
}

// Folder names stay as older runs made them, so a resumed run finds its chunks.
func TestRunConfigNames(t *testing.T) {
	_, cat := TestModels()
	for text, name := range map[string]string{
		"target":                             "target",
		"draft":                              "draft",
		"spec":                               "spec-g8-p0.05-prefix-paper-alignon",
		"target:num_iter=3:steps=5":          "target-it3-s5",
		"target:num_iter=3:anneal=5":         "target-it3-late5",
		"target:final_noise=off":             "target-nofinalnoise",
		"target:steps=5:sampler=ddim:eta=1":  "target-s5-ddim-eta1",
		"spec:verify=group:steps=5":          "spec-g8-p0.05-group-paper-alignon-s5",
		"spec:draft=self:gamma=4":            "spec-g4-p0.05-prefix-paper-alignon-draftself",
		"spec:rejection=target":              "spec-g8-p0.05-prefix-paper-alignon-rejectiontarget",
		"spec:tolerance=0.5":                 "spec-g8-p0.05-prefix-paper-alignon-tolerance0.5",
		"spec:acceptance=exact:align=off":    "spec-g8-p0.05-prefix-exact-alignoff",
		"spec:verify=group:acceptance=exact": "spec-g8-p0.05-group-exact-alignon",
		"spec:prefill=0.2:gamma=auto":        "spec-gauto-p0.2-prefix-paper-alignon",
	} {
		rc, err := ParseRunConfig(text, runBase(), cat)
		if err != nil || rc.Name != name {
			t.Errorf("%s: name %q (%v), want %q", text, rc.Name, err, name)
		}
	}
	rc, err := ParseRunConfig("target:num_iter=3:final_noise=on", runBase(), cat)
	if err != nil || rc.Desc != "target-only num_iter=3 final_noise=on" {
		t.Errorf("description %q (%v)", rc.Desc, err)
	}
	rc, err = ParseRunConfig("spec:draft=self", runBase(), cat)
	if err != nil || rc.Desc != "spec gamma=8 prefill=0.05 verify=prefix acceptance=paper align=on draft=self" {
		t.Errorf("description %q (%v)", rc.Desc, err)
	}
}

// The settings reach the plan; baselines keep the final step's noise (as spec mode does).
func TestRunConfigReachesThePlan(t *testing.T) {
	_, cat := TestModels()
	rc, err := ParseRunConfig("spec:draft=self:rejection=target:tolerance=0.25", runBase(), cat)
	if err != nil {
		t.Fatal(err)
	}
	if c := rc.Plan.Spec; !c.SelfDraft || c.Rejection != arsampler.Target || c.Tolerance != 0.25 || rc.Plan.DraftPack != "" {
		t.Fatalf("config %+v: want self-draft, target rejection, tolerance 0.25, no draft pack", c)
	}
	rc, err = ParseRunConfig("target:num_iter=2:anneal=3", runBase(), cat)
	if err != nil {
		t.Fatal(err)
	}
	if o := rc.Plan.Options; o.NumIter != 2 || o.StepsLate != 3 || !o.FinalStepNoise || o.Seed != 1 || rc.Plan.Mode != ModeTarget {
		t.Fatalf("options %+v", o)
	}
	_, exitCat := TestModelsWithExit()
	rc, err = ParseRunConfig("spec:draft=exit:exit_max_error=0.3", runBase(), exitCat)
	if err != nil {
		t.Fatal(err)
	}
	if c := rc.Plan.Spec; !c.EarlyExit || c.SelfDraft || c.ExitMaxError != 0.3 || c.Schedule != arsampler.Batched {
		t.Fatalf("config %+v: want early exit with bound 0.3, batched", c)
	}
	if want := "spec-g8-p0.05-prefix-paper-alignon-draftexit-exit_max_error0.3"; rc.Name != want {
		t.Errorf("name %q, want %q", rc.Name, want)
	}
}

// A configuration's values are refused with the field errors a request gets for the same
// values: one code path for both.
func TestRunConfigErrorsAreRequestErrors(t *testing.T) {
	_, cat := TestModels()
	_, exitCat := TestModelsWithExit()
	bad, neg := 99, -1.0
	for _, tc := range []struct {
		text  string
		field string
		same  *api.GenerateRequest // the request whose error must read the same, if any
	}{
		{"target:num_iter=99", "num_iter", &api.GenerateRequest{Mode: "target", NumIter: &bad}},
		{"target:steps=-1", "steps", nil},
		{"target:steps=0", "steps", nil}, // 0 would be "target" again in another folder
		{"spec:gamma=0", "gamma", &api.GenerateRequest{Mode: "spec", Gamma: "0"}},
		{"spec:verify=both", "verify", &api.GenerateRequest{Mode: "spec", Verify: "both"}},
		{"spec:prefill=-1", "prefill", &api.GenerateRequest{Mode: "spec", Prefill: &neg}},
		{"spec:num_iter=3", "num_iter", nil}, // spec decodes one token per step: not a spec key
		{"target:tolerance=0.5", "tolerance", nil},
		{"spec:tolerance=-1", "tolerance", nil},
		{"spec:tolerance=NaN", "tolerance", nil},
		{"spec:draft=other", "draft", nil},
		{"spec:rejection=maybe", "rejection", nil},
		{"spec:align=maybe", "align", nil},
		{"spec:steps=x", "steps", nil},
		{"spec:gamma", "configuration", nil},
		{"mixed", "kind", nil},
	} {
		_, err := ParseRunConfig(tc.text, runBase(), cat)
		if Field(err) != tc.field || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "configuration \""+tc.text+"\": ") {
			t.Errorf("%s: error %v (field %q), want a field error on %s", tc.text, err, Field(err), tc.field)
			continue
		}
		if tc.same != nil {
			req := runBase()
			tc.same.Class, tc.same.Seed, tc.same.CFG, tc.same.Temperature = req.Class, req.Seed, req.CFG, req.Temperature
			_, want := ValidateRequest(Request{GenerateRequest: *tc.same}, cat)
			if got := strings.TrimPrefix(err.Error(), "configuration \""+tc.text+"\": "); want == nil || got != want.Error() {
				t.Errorf("%s: %q, the request's error %v", tc.text, got, want)
			}
		}
	}
	for text, field := range map[string]string{
		"spec:draft=exit:exit_max_error=-1": "exit_max_error",
		"spec:draft=exit:verify=group":      "verify",
		"spec:schedule=lazy":                "schedule", // not a configuration key: the run's --schedule sets it
	} {
		if _, err := ParseRunConfig(text, runBase(), exitCat); Field(err) != field {
			t.Errorf("%s: error %v (field %q), want field %s", text, err, Field(err), field)
		}
	}
}
