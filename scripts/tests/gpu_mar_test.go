package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// marRecord is one line of gpu_mar.py's results.jsonl: measured (stats) or not, and why.
type marRecord struct {
	Key     string            `json:"key"`
	Stats   json.RawMessage   `json:"stats"`
	Skipped string            `json:"skipped"`
	Cut     string            `json:"cut"`
	Error   string            `json:"error"`
	Env     map[string]string `json:"env"`
}

// The stages of the device script (gpu_mar.py), in its order; a stage that disappears from the
// script (or is renamed) fails TestGPUMarTiny.
var marStages = []string{"pack", "ratio-b8", "ratio-b64", "parity", "parity-trained", "kernels", "head-kinds", "cache", "fp32", "official-fp32", "per-step", "batch-1", "stream", "pick", "cache-kv", "energy-head"}

// The MAR-B device script (scripts/gpu/gpu_mar.py, the default of gpu_bench.sh) at tiny sizes
// on the CPU: every stage must run and every row of its matrix (official fp32 and bf16
// autocast; marspec fp32 and fp16 with the fused head replayed, unrolled and rolled, the
// per-step head and the cache; fp16 parity and replay parity; the energy head) must be in
// results.jsonl, measured with numbers
// that parse or skipped with its reason: fp16 is refused on the CPU, and torch 1.13 cannot
// autocast MAR to bfloat16 there. A rerun measures nothing again, and the report has the rows.
// The official code's rows run where MARSPEC_OFFICIAL_MAR names a copy of it (docs/gpu.md; about
// 30 s more on two cores), else they must say it is missing.
func TestGPUMarTiny(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	bin := buildMarspec(t)
	out := filepath.Join(dir, "mar")
	official := os.Getenv("MARSPEC_OFFICIAL_MAR")
	if official != "" {
		official, _ = filepath.Abs(official)
	}
	run := func() string {
		return runTinyDriver(t, lib, tool("gpu", "gpu_mar.py"), "--bin", bin, "--out", out, "--packs", filepath.Join(dir, "packs"),
			"--official", official)
	}
	run()
	recs := readMarRecords(t, filepath.Join(out, "results.jsonl"))

	_, halfErr := os.Stat(tool("packs", "half_pack.py"))
	if r := recs["pack/fp32"]; r.Stats == nil {
		t.Fatalf("no pack: %+v", r)
	}
	if r := recs["pack/fp16"]; halfErr == nil && r.Stats == nil {
		t.Errorf("half_pack.py exists but did not run: %+v", r)
	} else if halfErr != nil && !strings.Contains(r.Skipped, "half_pack.py is not on this branch") {
		t.Errorf("pack/fp16 without half_pack.py: %+v", r)
	}
	for _, b := range []int{1, 2, 4} {
		for _, kind := range []string{"fp32", "bf16"} {
			// measured where the official code is in out/official-mar (fetched by hand), else skipped
			key := fmt.Sprintf("official/%s/b%d", kind, b)
			if r, ok := recs[key]; !ok || (r.Stats == nil && r.Skipped == "") || (official == "" && !strings.Contains(r.Skipped, "no copy of the official")) {
				t.Errorf("%s: %+v", key, r)
			} else if r.Stats != nil {
				checkIPS(t, key, r.Stats, false)
			}
		}
	}
	// fp16 rows are refused on the CPU; the same rows run in fp32 there (the head paths'
	// comparisons use fp32 on the CPU), each on the graph its head names: the unrolled graph for
	// fused, graph (fixed-address runs, nothing captured on the CPU) and graph+cache, the ONNX
	// Loop for rolled, none for per-step
	refused := []string{"fp16/graph/b1", "fp16/graph/b2", "fp16/graph/b4", "fp16/per-step/b2", "fp16/per-step/b4"}
	for _, row := range refused {
		if r := recs["marspec/"+row]; !strings.Contains(r.Skipped, "refused on the CPU") {
			t.Errorf("%s: want skipped as refused on the CPU, got %+v", row, r)
		}
	}
	if r := recs["pack/unrolled"]; r.Stats == nil {
		t.Errorf("unroll_head.py did not run: %+v", r)
	}
	unrolled := map[string]bool{"graph": true, "fused": true, "graph+cache": true, "rolled": false, "per-step": false}
	for _, row := range []string{"graph/b1", "graph/b2", "graph/b4", "fused/b1", "fused/b2", "fused/b4", "rolled/b2", "rolled/b4",
		"per-step/b1", "per-step/b2", "per-step/b4", "graph+cache/b2", "graph+cache/b4"} {
		key := "marspec/fp32/" + row
		var s struct {
			Sessions []string `json:"unrolled_sessions"`
		}
		want := unrolled[strings.Split(row, "/")[0]]
		if r := recs[key]; r.Stats == nil || json.Unmarshal(r.Stats, &s) != nil {
			t.Errorf("%s not measured: %+v", key, r)
		} else if checkIPS(t, key, r.Stats, true); (len(s.Sessions) > 0) != want {
			t.Errorf("%s: unrolled sessions %q, want some: %v", key, s.Sessions, want)
		}
	}
	for _, b := range []string{"b2", "b4"} { // the cache rows run the device's path: K/V kept where the graph runs
		if r := recs["marspec/fp32/graph+cache/"+b]; r.Env["MARSPEC_CACHE_ON_DEVICE"] != "on" {
			t.Errorf("graph+cache/%s ran with MARSPEC_CACHE_ON_DEVICE=%q, want on", b, r.Env["MARSPEC_CACHE_ON_DEVICE"])
		}
	}
	for _, key := range []string{"parity/fp16-vs-fp32", "parity/trained-fp16-vs-fp32/stream-fp32", "parity/trained-fp16-vs-fp32/stream-fp16"} {
		if r := recs[key]; !strings.Contains(r.Skipped, "refused on the CPU") {
			t.Errorf("%s: %+v", key, r)
		}
	}
	for key, images := range map[string]int{"parity/check-fused-vs-per-step": 2, "parity/graph-vs-plain": 2, "parity/check-trained-packs": 8} {
		var check struct{ Images, Within int }
		if r := recs[key]; r.Stats == nil || json.Unmarshal(r.Stats, &check) != nil || check.Images != images || check.Within != images {
			t.Errorf("%s: two head paths that agree: %+v (%s)", key, check, r.Stats)
		}
	}
	// the unrolled head and the transformer as ONNX Runtime runs them: a head session per row
	// count the generation called, each with nodes to count (fp32 on the CPU, which refuses fp16)
	var kernels struct {
		Heads []struct {
			Nodes   int     `json:"nodes"`
			PerStep float64 `json:"per_step"`
		} `json:"heads"`
		Transformers []struct {
			Nodes int `json:"nodes"`
		} `json:"transformers"`
	}
	if r := recs["kernels/fp32"]; r.Stats == nil || json.Unmarshal(r.Stats, &kernels) != nil || len(kernels.Heads) == 0 ||
		kernels.Heads[0].Nodes < 5*20 || kernels.Heads[0].PerStep <= 0 || len(kernels.Transformers) == 0 || kernels.Transformers[0].Nodes == 0 {
		t.Errorf("kernels/fp32: want the unrolled head's optimised sessions counted: %+v (%s)", r, r.Stats)
	}
	// the timing row of a pack converted with the head's residual stream fp16 (fp32 here: the
	// pack and the row run, and stay out of the ratios)
	if r := recs["timing/fp32/graph-head-stream-fp16/b2"]; r.Stats == nil {
		t.Errorf("stream timing row not measured: %+v", r)
	} else {
		checkIPS(t, "timing/fp32/graph-head-stream-fp16/b2", r.Stats, true)
	}
	// the timing row with every pass handing back its whole z, beside the picking row
	if r := recs["timing/fp32/graph-pick-off/b4"]; r.Stats == nil {
		t.Errorf("pick timing row not measured: %+v", r)
	} else {
		checkIPS(t, "timing/fp32/graph-pick-off/b4", r.Stats, true)
	}
	// the timing row with the cache's K/V in host memory, beside the cache row (on the device)
	if r := recs["timing/fp32/graph+cache-kv-host/b2"]; r.Stats == nil || r.Env["MARSPEC_CACHE_ON_DEVICE"] != "off" {
		t.Errorf("cache-kv timing row not measured with the K/V in host memory: %+v", r)
	} else {
		checkIPS(t, "timing/fp32/graph+cache-kv-host/b2", r.Stats, true)
	}
	if r := recs["energy-head"]; r.Skipped == "" {
		t.Errorf("energy head: %+v", r)
	}

	md, err := os.ReadFile(filepath.Join(out, "gpu-mar.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(md)
	stageRows := map[string]string{}
	for _, line := range strings.Split(report, "\n") {
		if f := strings.Split(line, " | "); len(f) == 4 && strings.HasPrefix(line, "| ") {
			stageRows[strings.TrimPrefix(f[0], "| ")] = line
		}
	}
	for _, s := range marStages {
		if !strings.HasSuffix(stageRows[s], "| done |") {
			t.Errorf("stage %s not done in the report: %q", s, stageRows[s])
		}
	}
	for _, w := range []string{"| official | fp32 |", "| official | bf16 autocast |", "| marspec | fp32 | graph | ",
		"| marspec | fp32 | fused | ", "| marspec | fp32 | rolled | ", "| marspec | fp32 | graph+cache | ",
		"| marspec | fp16 | graph | skipped [", "Tiny sizes on the CPU", "fp16 vs fp32: skipped", "replayed as CUDA graphs vs not",
		"head share", "| done |", "the replayed head with its residual stream fp16", "with the default stream (",
		"handing back its whole z", "picking the predicted rows: "} {
		if !strings.Contains(report, w) {
			t.Errorf("report lacks %q:\n%s", w, report)
		}
	}
	if strings.Contains(report, "not measured") || strings.Contains(report, "not reached yet") || strings.Contains(report, "failed") {
		t.Errorf("report has rows left out:\n%s", report)
	}

	if log := run(); strings.Contains(log, "gpu_mar: marspec/fp32/") || strings.Contains(log, "gpu_mar: pack/fp32") {
		t.Errorf("the rerun measured again instead of reusing results.jsonl:\n%s", log)
	}
}

// checkIPS checks a measured row's images/s and, for marspec, its head share and head path.
func checkIPS(t *testing.T, key string, raw json.RawMessage, marspec bool) {
	t.Helper()
	var s struct {
		IPS      float64 `json:"images_per_second"`
		HeadPath string  `json:"head_path"`
		Head     struct {
			Calls int     `json:"calls"`
			Share float64 `json:"share"`
		} `json:"head_step"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.IPS <= 0 {
		t.Errorf("%s: images/s %v (%v): %s", key, s.IPS, err, raw)
		return
	}
	if !marspec {
		return
	}
	want := "fused"
	if strings.Contains(key, "/per-step/") {
		want = "per-step"
	}
	if s.HeadPath != want || s.Head.Calls == 0 || s.Head.Share <= 0 || s.Head.Share > 1 {
		t.Errorf("%s: head path %q (want %q), head calls %d, share %v", key, s.HeadPath, want, s.Head.Calls, s.Head.Share)
	}
}

// readMarRecords maps each key of results.jsonl to its last line (a rerun appends the rows it
// tried again).
func readMarRecords(t *testing.T, path string) map[string]marRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]marRecord{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r marRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[r.Key] = r
	}
	return out
}

// TestGPUMarPlainNormsFallback: were ONNX Runtime's SkipLayerNormalization (in every fp16 fused
// head) to fail on the lent device, the device script makes the pack's fp16 graphs again with
// half_pack.py --plain-norms, once, and runs its ratio rows again (test_gpu_plain_norms.py, with
// stand-in rows failing as a device would); another failure converts nothing.
func TestGPUMarPlainNormsFallback(t *testing.T) {
	needTorch(t)
	pack := filepath.Join(t.TempDir(), "pack")
	halfPack(t, randomPack(t, "ci_target", ""), "--out", pack)
	unrollHead(t, pack, 100)
	out, err := exec.Command(python, "test_gpu_plain_norms.py", pack, filepath.Join(t.TempDir(), "out")).CombinedOutput()
	if err != nil {
		t.Fatalf("test_gpu_plain_norms.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// The device script's preflight, where a pass that hands back only the picked rows fails on
// the device, runs every later marspec command with MARSPEC_PICK_ROWS=off and says so in the
// report; any other failure turns nothing off (test_gpu_pick_rows.py, stand-in commands).
func TestGPUMarPickRowsFallback(t *testing.T) {
	needTorch(t)
	out, err := exec.Command(python, "test_gpu_pick_rows.py", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("test_gpu_pick_rows.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// The device script's cache stage, where the cache kept on the device fails, runs that row and
// the next with MARSPEC_CACHE_ON_DEVICE=off and says so in the report; any other failure turns
// nothing off (test_gpu_cache_on_device.py, stand-in commands).
func TestGPUMarCacheOnDeviceFallback(t *testing.T) {
	needTorch(t)
	out, err := exec.Command(python, "test_gpu_cache_on_device.py", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("test_gpu_cache_on_device.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
