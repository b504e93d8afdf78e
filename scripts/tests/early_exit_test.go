package tests

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"marspec/mar"
	"marspec/onnxrt"
)

// The early-exit export at toy size: scripts/tests/test_early_exit.py checks the split in PyTorch and
// writes both graphs with PyTorch's outputs on fixed inputs; here ONNX Runtime runs the graphs
// through mar.ONNXEarlyExit (the loader sampling uses) and must give the same z_exit,
// exit_logvar, hidden and, from that hidden, the same z (1e-4).
func TestEarlyExitExportRoundTrip(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	if out, err := exec.Command(python, "test_early_exit.py", "--out", dir).CombinedOutput(); err != nil {
		t.Fatalf("test_early_exit.py: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "parity.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Batch      int       `json:"batch"`
		Width      int       `json:"width"`
		HiddenLen  int       `json:"hidden_len"`
		Tokens     []float32 `json:"tokens"`
		Mask       []float32 `json:"mask"`
		DropClass  []float32 `json:"drop_class"`
		ClassIDs   []int64   `json:"class_ids"`
		ZExit      []float32 `json:"z_exit"`
		ExitLogvar []float32 `json:"exit_logvar"`
		Hidden     []float32 `json:"hidden"`
		Z          []float32 `json:"z"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	m := &mar.Manifest{TokenDim: 16, Width: fx.Width, BufferSize: fx.HiddenLen - 49,
		EarlyExit: &mar.EarlyExitSpec{Depth: 1, Blocks: 2, ExitBlocks: 1, Draft: "exit_draft.onnx", Rest: "exit_rest.onnx", HiddenLen: fx.HiddenLen}}
	m.Grid.Height, m.Grid.Width = 7, 7
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	x, err := mar.NewONNXEarlyExit(read("exit_draft.onnx"), read("exit_rest.onnx"), m, onnxrt.SessionOptions{IntraOpThreads: 1}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	b, L, W := fx.Batch, 49, fx.Width
	zExit, logVar, hidden := make([]float32, b*L*W), make([]float32, b*L), make([]float32, b*fx.HiddenLen*W)
	if err := x.Draft(fx.Tokens, fx.Mask, fx.ClassIDs, fx.DropClass, b, zExit, logVar, hidden); err != nil {
		t.Fatal(err)
	}
	z := make([]float32, b*L*W)
	if err := x.Rest(hidden, fx.Mask, b, z); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want []float32
	}{{"z_exit", zExit, fx.ZExit}, {"exit_logvar", logVar, fx.ExitLogvar}, {"hidden", hidden, fx.Hidden}, {"z", z, fx.Z}} {
		if len(c.got) != len(c.want) {
			t.Fatalf("%s: %d values, PyTorch %d", c.name, len(c.got), len(c.want))
		}
		worst := 0.0
		for i := range c.got {
			worst = math.Max(worst, math.Abs(float64(c.got[i]-c.want[i])))
		}
		t.Logf("%s: max |ONNX Runtime - PyTorch| %.2g", c.name, worst)
		if worst > tolerance {
			t.Errorf("%s differs from PyTorch by %g (allowed %g)", c.name, worst, tolerance)
		}
	}
}
