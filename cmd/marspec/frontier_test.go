package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
