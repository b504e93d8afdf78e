package tests

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The GPU benchmark's driver at tiny sizes on the CPU, cut to one row of each kind: it must
// run the marspec of this commit end to end (flags as they are now), keep one result line per
// measurement, skip them on a rerun, and write the report's rows with numbers.
func TestGPUBenchTiny(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	bin := buildMarspec(t)
	out := filepath.Join(dir, "bench")
	run := func() string {
		return runTinyDriver(t, lib, tool("gpu", "gpu_bench.py"), "--bin", bin, "--out", out, "--packs", filepath.Join(dir, "packs"),
			"--pairs", "random", "--batches", "2", "--num-iters", "0,4", "--gammas", "4")
	}
	run()
	results := readResults(t, filepath.Join(out, "results.jsonl"))
	// target-only at 1 token/step and 4 steps, at --batches and at the spec batch (4 in --tiny);
	// pack and self drafts, prefix and group
	want := []string{"random/target/b2/k0", "random/target/b2/k4", "random/target/b4/k0", "random/target/b4/k4", "random/spec-pack/b4/g4/prefix", "random/spec-pack/b4/g4/group",
		"random/spec-self/b4/g4/prefix", "random/spec-self/b4/g4/group"}
	for _, k := range want {
		ips, ok := results[k]
		if !ok {
			t.Errorf("no result %s (have %v)", k, results)
		} else if ips <= 0 {
			t.Errorf("%s: images/s %v", k, ips)
		}
	}
	if log := run(); strings.Contains(log, "gpu_bench: random/") {
		t.Errorf("the rerun measured again instead of reusing results.jsonl:\n%s", log)
	}
	md, err := os.ReadFile(filepath.Join(out, "gpu-bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(md)
	for _, w := range []string{"| 2 | ", "| pack | 4 | prefix | ", "| self | 4 | group | ", "Tiny sizes on the CPU"} {
		if !strings.Contains(report, w) {
			t.Errorf("report lacks %q:\n%s", w, report)
		}
	}
	if strings.Contains(report, "not measured") || strings.Contains(report, "| - | - |") {
		t.Errorf("report has unmeasured rows or speedups:\n%s", report)
	}
}

// readResults maps each measurement key of results.jsonl to its images/s.
func readResults(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r struct {
			Key   string `json:"key"`
			Stats struct {
				IPS float64 `json:"images_per_second"`
			} `json:"stats"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, dup := out[r.Key]; dup {
			t.Errorf("%s measured twice", r.Key)
		}
		out[r.Key] = r.Stats.IPS
	}
	return out
}

// The GPU benchmark measures the early-exit draft where the target pack has one (the embedded
// target, by name) and not where it has none (a folder whose manifest lacks early_exit).
func TestGPUBenchDrafters(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "models", "target", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "early_exit")
	plain, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), plain, 0o644); err != nil {
		t.Fatal(err)
	}
	script := "import sys\nsys.path.insert(0, \"" + scriptsDir + "\")\nfrom gpu import gpu_bench\nfor p in sys.argv[1:]: print(','.join(d[0] for d in gpu_bench.Bench.drafters(p, 'draft')))"
	out, err := exec.Command(python, "-c", script, "target", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"pack,self,exit,exit-bound0.2", "pack,self"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("drafters %q, want %q", got, want)
	}
}

// runTinyDriver runs a GPU driver script at tiny sizes on the CPU (one thread, the CPU runtime
// at lib) and returns its log; a failure ends the test with it.
func runTinyDriver(t *testing.T, lib, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command(python, append([]string{script, "--tiny", "--device", "cpu", "--python", python, "--threads", "1"}, args...)...)
	cmd.Env = append(os.Environ(), "MARSPEC_ORT_LIB="+lib, "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, log)
	}
	return string(log)
}
