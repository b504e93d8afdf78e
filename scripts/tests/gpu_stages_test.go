package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The fat-binary pruner that makes the GPU runtime fit two transfers, on a small ELF file with
// two architectures (scripts/tests/test_prune_fatbin.py says what it checks).
func TestPruneFatbin(t *testing.T) {
	if out, err := exec.Command(python, "test_prune_fatbin.py").CombinedOutput(); err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("test_prune_fatbin.py: %v\n%s", err, out)
	}
}

// The staged GPU run (gpu_stages.py) at tiny sizes on the CPU, parity and the full-size stage (the embedded
// stage is the same generate calls as the broader grid's test): CPU against CPU must be
// identical and within tolerance, the serve POST must equal the local image, the pass table
// must have a row per pass size, and a rerun must measure nothing again.
func TestGPUStagesTiny(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	bin := buildMarspec(t)
	out := filepath.Join(dir, "stages")
	run := func() string {
		return runTinyDriver(t, lib, tool("gpu", "gpu_stages.py"), "--bin", bin, "--out", out, "--packs", filepath.Join(dir, "packs"),
			"--stages", "parity,fullsize")
	}
	run()
	raw, err := os.ReadFile(filepath.Join(out, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		got[r["key"].(string)] = r
	}
	for _, k := range []string{"parity/default", "parity/target", "parity/spec-prefix-exact", "parity/serve"} {
		r, ok := got[k]
		if !ok {
			t.Errorf("no result %s", k)
			continue
		}
		if r["images"] != r["identical"] || r["images"] != r["within"] || r["images"].(float64) < 1 {
			t.Errorf("%s: the CPU against itself must be identical: %v", k, r)
		}
	}
	for _, k := range []string{"fullsize/passes", "fullsize/parts", "fullsize/marspec/b2/k4"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no result %s (have %v)", k, got)
		}
	}
	if log := run(); strings.Contains(log, "gpu_stages: generate") || strings.Contains(log, "gpu_stages: bench") {
		t.Errorf("the rerun measured again instead of reusing results.jsonl:\n%s", log)
	}
	md, err := os.ReadFile(filepath.Join(out, "gpu-stages.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(md)
	for _, w := range []string{"| default | 4 | 4 | 4 |", "| transformer pass (ms) | 5 |", "Tiny sizes on the CPU"} {
		if !strings.Contains(report, w) {
			t.Errorf("report lacks %q:\n%s", w, report)
		}
	}
}
