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
	var rep struct {
		Results []struct {
			ImagesPerSec   float64  `json:"images_per_second"`
			FID            float64  `json:"fid"`
			Images         int      `json:"images"`
			Pareto         bool     `json:"pareto"`
			TwoSampleFID   float64  `json:"fid_to_reference_second_sample"`
			ReferenceFloor bool     `json:"reference_second_sample"`
			Alpha          *float64 `json:"alpha"`
			SpeedupVsRef   float64  `json:"speedup_vs_reference"`
		}
	}
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
