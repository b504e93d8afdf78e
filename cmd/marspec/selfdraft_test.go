package main

import (
	"encoding/json"
	"testing"
)

// generate --draft self runs without a draft network (no draft passes, head rows instead) and
// reports alpha with its Hoeffding interval and the GPU prediction; the lossy knobs are named
// in the output and the run is not called lossless.
func TestGenerateSelfDraft(t *testing.T) {
	run := func(args ...string) map[string]any {
		t.Helper()
		out, stderr, code := marspec(t, nil, append([]string{"generate", "--class", "2", "--n", "2", "--steps", "5",
			"--draft", "self", "--acceptance", "exact", "--gamma", "3", "--json", "--out", t.TempDir()}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var stats map[string]any
		if err := json.Unmarshal([]byte(out), &stats); err != nil {
			t.Fatalf("--json output is not one JSON object: %v\n%s", err, out)
		}
		return stats
	}
	s := run()
	if s["draft_forwards"].(float64) != 0 || s["draft_head_rows"].(float64) == 0 || s["draft"] != "self" || s["lossless"] != true {
		t.Fatalf("self-draft run: %v", s)
	}
	if lo, a, hi := s["alpha_low"].(float64), s["alpha"].(float64), s["alpha_high"].(float64); !(lo <= a && a <= hi && hi-lo > 0) {
		t.Fatalf("alpha interval %v %v %v", lo, a, hi)
	}
	if s["gpu_speedup_predicted"].(float64) <= 0 || s["schedule"] != "batched" {
		t.Fatalf("prediction %v, schedule %v", s["gpu_speedup_predicted"], s["schedule"])
	}
	s = run("--rejection", "target", "--tolerance", "0.5")
	if s["lossless"] != false || s["rejection"] != "target" || s["resampled"].(float64) != 0 || s["tolerance_tv_bias"].(float64) <= 0 {
		t.Fatalf("lossy run: %v", s)
	}
	if _, stderr, code := marspec(t, nil, "generate", "--mode", "draft", "--draft", "self", "--out", t.TempDir()); code == 0 {
		t.Fatalf("draft-only mode with --draft self should fail: %s", stderr)
	}
}
