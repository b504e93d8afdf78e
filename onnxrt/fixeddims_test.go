package onnxrt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FixedDims gives a named free dimension one size: the session then refuses inputs of
// another size, and a size under 1 is refused with the dimension's name.
func TestFixedDims(t *testing.T) {
	needRuntime(t)
	g := openMixed(t, SessionOptions{IntraOpThreads: 1, FixedDims: []FixedDim{{Name: "n", Size: 2}}})
	var p, q []uint64
	if err := g.RunDims(Dims{2, 3, 1, 1}, func(in, _ Tensors) error { return mixedData(1)(in) }, mixedOutputs(&p, &q)); err != nil {
		t.Fatalf("n = 2 with n fixed to 2: %v", err)
	}
	if len(p) != 2*3*3 {
		t.Fatalf("%d outputs, want 18", len(p))
	}
	err := g.RunDims(Dims{3, 3, 1, 1}, func(in, _ Tensors) error { return mixedData(1)(in) }, mixedOutputs(&p, &q))
	if err == nil || !strings.Contains(err.Error(), "dimensions") {
		t.Fatalf("n = 3 with n fixed to 2 ran: %v", err)
	}
	_, err = NewGraph(mixedModel(), "mixed", SessionOptions{FixedDims: []FixedDim{{Name: "n", Size: 0}}},
		[]IOSpec{{Name: "x", Float64: true, Shape: []int64{-1, 3}}, {Name: "y", Shape: []int64{-2, -1, 3}}},
		[]IOSpec{{Name: "p", Float64: true, Shape: []int64{-2, -1, 3}}, {Name: "q", Shape: []int64{-2, -1, 3}}})
	if err == nil || !strings.Contains(err.Error(), "fixed dimension n: size 0, want at least 1") {
		t.Fatalf("size 0: %v", err)
	}
}

// With MARSPEC_ORT_OPTIMIZED_DIR set, each session opened writes its optimised graph there,
// one file per session, and still runs.
func TestOptimizedGraphsWritten(t *testing.T) {
	needRuntime(t)
	dir := filepath.Join(t.TempDir(), "optimized")
	t.Setenv(OptimizedDirEnv, dir)
	for range 2 {
		g := openMixed(t, SessionOptions{IntraOpThreads: 1})
		var p, q []uint64
		if err := g.RunDims(Dims{2, 3, 1, 1}, func(in, _ Tensors) error { return mixedData(1)(in) }, mixedOutputs(&p, &q)); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "session-*.onnx"))
	if len(files) != 2 {
		t.Fatalf("optimised graphs %v, want one per session (2)", files)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v, size %v", f, err, st)
		}
	}
}
