package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type evalReport struct {
	Results []struct {
		Name          string
		FID           float64
		ISMean        float64 `json:"is_mean"`
		ClassAccuracy float64 `json:"class_accuracy"`
		Alpha         *float64
		Images        int
	}
}

func readReport(t *testing.T, dir string) evalReport {
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r evalReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// A run, the same run resumed, and the run split into two shards and merged give the same
// scores; a run folder refuses other settings.
func TestEvalResumeAndShards(t *testing.T) {
	args := []string{"--n", "20", "--chunk", "10", "--batch", "10", "--configs", "draft,spec:verify=group:gamma=4"}
	whole := t.TempDir()
	if _, stderr, code := marspec(t, nil, append([]string{"eval", "--out", whole}, args...)...); code != 0 {
		t.Fatalf("eval: %s", stderr)
	} else if !strings.Contains(stderr, "eval "+whole+": 4/4 chunks (100%)") || strings.Contains(stderr, "\r") {
		t.Fatalf("eval's progress in a log is not plain lines ending with 4/4 chunks: %q", stderr)
	}
	first := readReport(t, whole)
	if len(first.Results) != 2 || first.Results[0].Images != 20 || first.Results[1].Alpha == nil {
		t.Fatalf("report: %+v", first)
	}
	// resume: nothing to do, same report
	os.Remove(filepath.Join(whole, "report.json"))
	if _, stderr, code := marspec(t, nil, append([]string{"eval", "--out", whole}, args...)...); code != 0 {
		t.Fatalf("resume: %s", stderr)
	}
	if again := readReport(t, whole); again.Results[0].FID != first.Results[0].FID {
		t.Fatalf("resumed report differs")
	}
	// interrupted: one chunk lost, regenerated identically
	os.Remove(filepath.Join(whole, "draft", "chunk-00001.json"))
	if _, stderr, code := marspec(t, nil, append([]string{"eval", "--out", whole}, args...)...); code != 0 {
		t.Fatalf("resume after loss: %s", stderr)
	}
	if again := readReport(t, whole); again.Results[0].FID != first.Results[0].FID || again.Results[0].ISMean != first.Results[0].ISMean {
		t.Fatalf("regenerated chunk changed the scores: %+v vs %+v", again.Results[0], first.Results[0])
	}
	s0, s1, merged := t.TempDir(), t.TempDir(), t.TempDir()
	for i, dir := range []string{s0, s1} {
		out, stderr, code := marspec(t, nil, append([]string{"eval", "--out", dir, "--shard", []string{"0/2", "1/2"}[i]}, args...)...)
		if code != 0 || !strings.Contains(out, "waits for the other shards") {
			t.Fatalf("shard %d: %s %s", i, out, stderr)
		}
	}
	if _, stderr, code := marspec(t, nil, "eval", "merge", "--out", merged, s0, s1); code != 0 {
		t.Fatalf("merge: %s", stderr)
	}
	m := readReport(t, merged)
	for i := range first.Results {
		a, b := first.Results[i], m.Results[i]
		sameAlpha := (a.Alpha == nil) == (b.Alpha == nil) && (a.Alpha == nil || *a.Alpha == *b.Alpha)
		if a.FID != b.FID || a.ISMean != b.ISMean || a.ClassAccuracy != b.ClassAccuracy || !sameAlpha {
			t.Fatalf("merged shards differ from the single run: %+v vs %+v", b, a)
		}
	}
	// each configuration's statistics are written, and a merged run's equal the single run's
	out, stderr, code := marspec(t, nil, "fid", filepath.Join(whole, "draft-stats.npz"), filepath.Join(merged, "draft-stats.npz"))
	if code != 0 || !strings.HasPrefix(out, "FID 0.0000") {
		t.Fatalf("FID between the single and merged run's draft statistics: %q %s", out, stderr)
	}
	_, stderr, code = marspec(t, nil, "eval", "--out", whole, "--n", "30", "--chunk", "10", "--batch", "10", "--configs", "draft")
	want := `holds a run made with other settings: --n: the run has 20, this command 30; --configs: the run has ["draft","spec:verify=group:gamma=4"], this command ["draft"]; resume it`
	if code == 0 || !strings.Contains(stderr, want) || strings.Contains(stderr, "--seed") {
		t.Fatalf("other settings: %s\nwant each differing setting named: %s", stderr, want)
	}

}
