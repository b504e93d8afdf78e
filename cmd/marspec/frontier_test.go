package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/arsampler"
	"marspec/mar"
)

// A small frontier: a num_iter sweep and two speculative configurations, scored, timed and
// marked, with the reference's second sample as the noise floor.
func TestFrontierSmall(t *testing.T) {
	dir := t.TempDir()
	configs := "target,target:num_iter=7,target:num_iter=4:steps=10,spec:verify=group:acceptance=exact:gamma=4,spec:acceptance=exact:gamma=2"
	out, stderr, code := marspec(t, nil, "frontier", "--out", dir, "--n", "20", "--chunk", "10", "--batch", "10",
		"--configs", configs)
	if code != 0 {
		t.Fatalf("frontier: %s", stderr)
	}
	for _, want := range []string{"images/s", "| target:num_iter=7 |", "| spec:verify=group:acceptance=exact:gamma=4 |", "(noise floor)", "**yes**"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "frontier.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct{ Results []frontierRow }
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 6 {
		t.Fatalf("want 5 configurations and the reference's second sample, got %d rows", len(rep.Results))
	}
	pareto := 0
	for _, r := range rep.Results[:5] {
		if r.ImagesPerSec <= 0 || r.FID <= 0 || r.Images != 20 {
			t.Fatalf("row %+v", r)
		}
		if r.Pareto {
			pareto++
		}
	}
	if pareto == 0 {
		t.Fatalf("no configuration on the frontier")
	}
	if rep.Results[3].Alpha == nil || rep.Results[0].SpeedupVsRef != 1 {
		t.Fatalf("spec alpha or reference speed missing: %+v", rep.Results)
	}
	// the reference's second sample is another seed: different images, a positive FID to it
	if rep.Results[0].TwoSampleFID <= 0 || !rep.Results[5].ReferenceFloor {
		t.Fatalf("two-sample FID of the reference %g", rep.Results[0].TwoSampleFID)
	}
	if _, err := os.Stat(filepath.Join(dir, "frontier.png")); err != nil {
		t.Fatal(err)
	}
}

// A bad configuration is refused before the run folder is pinned, so the corrected command runs.
func TestFrontierBadConfigLeavesNoRun(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{"target:num_iter=abc", "target:gamma=4", "spec:num_iter=7", "target:steps=0",
		"target:anneal=80", "target:final_noise=maybe", "spec:verify=sideways", "tagret"} {
		_, stderr, code := marspec(t, nil, "frontier", "--out", dir, "--n", "10", "--configs", "target,"+bad)
		if code == 0 || !strings.Contains(stderr, "configuration") {
			t.Fatalf("%s: exit %d, %s", bad, code, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "run.json")); err == nil {
			t.Fatalf("%s left a run.json", bad)
		}
	}
	_, stderr, code := marspec(t, nil, "frontier", "--out", dir, "--n", "10", "--configs", "target,target", "--reference-config", "target")
	if code == 0 || !strings.Contains(stderr, "same configuration") {
		t.Fatalf("a repeated configuration: %s", stderr)
	}
	_, stderr, code = marspec(t, nil, "frontier", "--out", dir, "--n", "10", "--configs", "target:num_iter=7")
	if code == 0 || !strings.Contains(stderr, "reference-config") {
		t.Fatalf("a reference outside the configurations: %s", stderr)
	}
}

func TestMarkFrontier(t *testing.T) {
	row := func(cfg string, ips, fid, twoSample float64) frontierRow {
		r := frontierRow{Config: cfg, ImagesPerSec: ips, TwoSampleFID: twoSample}
		r.FID = fid
		return r
	}
	rows := []frontierRow{
		row("target", 10, 40, 1.0), // reference: noise scale 1.0; "fast" is faster and within it
		row("fast", 30, 40.5, 0),   // faster, within noise: Pareto
		row("faster", 60, 45, 0),   // fastest, outside noise: Pareto
		row("slow", 5, 41, 0),      // dominated by the reference
		row("better", 8, 39, 0),    // slower and better by less than the noise: dominated by target
		row("best", 7, 37, 0),      // slower and better by more than the noise: Pareto
		row("tie", 30, 41, 0),      // as fast as "fast", worse: dominated
	}
	markFrontier(rows, frontierSettings{Reference: "target"})
	want := map[string][2]bool{"target": {false, true}, "fast": {true, true}, "faster": {true, false},
		"slow": {false, true}, "better": {false, true}, "best": {true, true}, "tie": {false, true}}
	for _, r := range rows {
		if w := want[r.Config]; r.Pareto != w[0] || r.WithinNoise != w[1] {
			t.Fatalf("%s: pareto %v within noise %v, want %v", r.Config, r.Pareto, r.WithinNoise, w)
		}
	}
	// without a reference the noise is 0: raw dominance, so "better" and the old reference stay
	raw := append([]frontierRow(nil), rows...)
	markFrontier(raw, frontierSettings{Reference: "none of them"})
	for _, r := range raw {
		if wantPareto := r.Config != "slow" && r.Config != "tie"; r.Pareto != wantPareto {
			t.Fatalf("raw rule: %s pareto %v, want %v", r.Config, r.Pareto, wantPareto)
		}
	}
	if best := recommended(rows); best == nil || best.Config != "fast" || best.SpeedupVsRef != 3 {
		t.Fatalf("recommended %+v, want fast at 3x", best)
	}
}

func TestRunConfigNames(t *testing.T) {
	m := &mar.Model{Manifest: &mar.Manifest{TokenDim: 16}}
	m.Manifest.Grid.Height, m.Manifest.Grid.Width = 7, 7
	m.Manifest.Diffusion.TrainingSteps, m.Manifest.Diffusion.SamplingSteps = 1000, 50
	s := evalSettings{Seed: 1, CFG: 1, Temperature: 1}
	for text, name := range map[string]string{
		"target":                     "target",
		"draft":                      "draft",
		"spec":                       "spec-g8-p0.05-prefix-paper-alignon",
		"target:num_iter=7:steps=25": "target-it7-s25",
		"target:num_iter=7:anneal=5": "target-it7-late5",
		"spec:verify=group:steps=25": "spec-g8-p0.05-group-paper-alignon-s25",
		"spec:draft=self:gamma=4":    "spec-g4-p0.05-prefix-paper-alignon-draftself",
		"spec:rejection=target":      "spec-g8-p0.05-prefix-paper-alignon-rejectiontarget",
		"spec:tolerance=0.5":         "spec-g8-p0.05-prefix-paper-alignon-tolerance0.5",
	} {
		rc, err := parseRunConfig(text, s, m, specFlags{})
		if err != nil || rc.name != name {
			t.Fatalf("%s: name %q (%v), want %q", text, rc.name, err, name)
		}
	}
}

// The draft source and the lossy knobs reach the sampler's configuration; bad values are
// refused before anything runs, naming the key and what is allowed.
func TestRunConfigSpecKnobs(t *testing.T) {
	m := &mar.Model{Manifest: &mar.Manifest{TokenDim: 16}}
	m.Manifest.Grid.Height, m.Manifest.Grid.Width = 7, 7
	m.Manifest.Diffusion.TrainingSteps, m.Manifest.Diffusion.SamplingSteps = 1000, 50
	s := evalSettings{Seed: 1, CFG: 1, Temperature: 1}
	rc, err := parseRunConfig("spec:draft=self:rejection=target:tolerance=0.25", s, m, specFlags{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.spec.config(rc.opt)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.SelfDraft || cfg.Rejection != arsampler.Target || cfg.Tolerance != 0.25 {
		t.Fatalf("config %+v: want self-draft, target rejection, tolerance 0.25", cfg)
	}
	for text, want := range map[string]string{
		"spec:draft=other":     "allowed: pack, self",
		"spec:tolerance=-1":    "at least 0",
		"spec:tolerance=NaN":   "at least 0",
		"target:tolerance=0.5": "unknown for target",
	} {
		if _, err := parseRunConfig(text, s, m, specFlags{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", text, err, want)
		}
	}
	rc, err = parseRunConfig("spec:rejection=maybe", s, m, specFlags{})
	if err == nil {
		_, err = rc.spec.config(rc.opt)
	}
	if err == nil || !strings.Contains(err.Error(), "maybe") {
		t.Errorf("rejection=maybe: error %v, want one naming the value", err)
	}
}
