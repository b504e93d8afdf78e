package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"marspec/mar"
	"marspec/onnxrt"
)

// A pack whose graphs keep their weights in page-aligned NAME.onnx.data files
// (aligned_weights.py, which ONNX Runtime maps instead of copying) gives the same pixels as the
// pack with its weights inside, at fp32 with and without the cache and at int8; quantize_pack.py
// reads such a pack; and a second run of the tool changes no byte.
func TestAlignedWeightsPack(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	whole, aligned := filepath.Join(dir, "whole"), filepath.Join(dir, "aligned")
	copyTree(t, filepath.Join(repoRoot, "models", "target"), whole)
	copyTree(t, filepath.Join(repoRoot, "models", "target"), aligned)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(python, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", filepath.Base(args[0]), err, out)
		}
		return string(out)
	}
	run(tool("packs", "quantize_pack.py"), whole)
	log := run(tool("packs", "aligned_weights.py"), aligned, "--min-mb", "0") // the embedded graphs are small
	run(tool("packs", "quantize_pack.py"), aligned)                           // reads weights from .data files
	run(tool("packs", "aligned_weights.py"), aligned, "--min-mb", "0")        // and the int8 graphs too
	graphs := []string{"transformer.onnx", "head.onnx", "head_loop.onnx", "transformer_cached.onnx", "decoder.onnx"}
	for _, g := range graphs {
		if _, err := os.Stat(filepath.Join(repoRoot, "models", "target", g)); err != nil {
			continue // the embedded target decodes without a graph
		}
		if !strings.Contains(log, g+": weights in "+g+".data") {
			t.Errorf("aligned_weights.py did not move %s's weights:\n%s", g, log)
		}
	}
	// every moved tensor starts at a multiple of 64 KiB, which is what lets ONNX Runtime map it
	check := run("-c", `
import sys, onnx
moved = 0
for path in sys.argv[1:]:
    m = onnx.load(path, load_external_data=False)
    for t in m.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            moved += 1
            offset = int({e.key: e.value for e in t.external_data}["offset"])
            assert offset % 65536 == 0, (path, t.name, offset)
print(moved)
`, filepath.Join(aligned, "transformer.onnx"), filepath.Join(aligned, "head.onnx"), filepath.Join(aligned, "transformer_cached.onnx"))
	if strings.TrimSpace(check) == "0" {
		t.Fatalf("no tensor of the aligned pack is external")
	}
	// the fused head's guided and unguided loop bodies each hold the weights they read
	// (loop_weights.py); the file holds them once, both bodies naming the same aligned bytes
	bodies := run("-c", `
import sys, onnx
sys.path.insert(0, sys.argv[2])
import loop_weights
m = onnx.load(sys.argv[1], load_external_data=False)
at = [{t.name: {e.key: e.value for e in t.external_data}.get("offset") for t in b.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
      for b in loop_weights.loop_bodies(m)]
assert len(at) == 2 and at[0] and at[0] == at[1], at
assert all(int(o) % 65536 == 0 for o in at[0].values()), at[0]
print(len(at[0]))
`, filepath.Join(aligned, "head_loop.onnx"), filepath.Join(repoRoot, "scripts", "packs"))
	if strings.TrimSpace(bodies) == "0" {
		t.Fatalf("the fused head's loop bodies hold no external weights")
	}

	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		precision string
		cache     bool
		loop      string // MARSPEC_HEAD_LOOP: "on" samples through the fused head
	}{{mar.FP32, false, ""}, {mar.FP32, true, ""}, {mar.Int8, false, ""}, {mar.FP32, false, "on"}, {mar.Int8, false, "on"}} {
		t.Setenv("MARSPEC_HEAD_LOOP", c.loop)
		opt := mar.Options{Seed: 3, CFG: 2, NumIter: 8, Steps: 5}
		if c.cache { // a full pass, then lazy steps: both cached paths
			opt.Cache = mar.CacheSettings{On: true, FullSteps: 2, RefreshEvery: 4, Recompute: 4, ReuseCFG: true}
		}
		want := generate(t, openAt(t, whole, c.precision), opt)
		got := generate(t, openAt(t, aligned, c.precision), opt)
		for i := range want {
			if !slices.Equal(got[i].Pixels, want[i].Pixels) {
				t.Errorf("%s cache=%v head loop %q image %d: the aligned pack's pixels differ from the whole pack's", c.precision, c.cache, c.loop, i)
			}
		}
	}

	before := readAll(t, aligned)
	run(tool("packs", "aligned_weights.py"), aligned, "--min-mb", "0")
	after := readAll(t, aligned)
	for name, b := range before {
		if !bytes.Equal(b, after[name]) {
			t.Errorf("a second run changed %s", name)
		}
	}
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		files[e.Name()] = mustRead(t, filepath.Join(dir, e.Name()))
	}
	return files
}
