package tests

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"marspec/diffusion"
	"marspec/mar"
	"marspec/onnxrt"
)

// The distilled head's export at toy size: scripts/tests/test_distill_head.py checks the teacher and
// the student's parametrisation in PyTorch, then writes a random student's graph, its manifest
// entry and PyTorch's outputs on fixed inputs. Here ONNX Runtime runs the graph through
// mar.NewONNXDistilledHead (one call: x0 within 1e-4) and through mar.Denoiser's K-step
// sampler with the same noise, rows guided and not (tokens within 1e-4 of
// distill_head.sample_student's, for K = 1, 2, 4).
func TestDistilledHeadExportRoundTrip(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	if out, err := exec.Command(python, "test_distill_head.py", "--out", dir).CombinedOutput(); err != nil {
		t.Fatalf("test_distill_head.py: %v\n%s", err, out)
	}
	var fx struct {
		N       int       `json:"n"`
		Dim     int       `json:"dim"`
		Width   int       `json:"width"`
		Z       []float32 `json:"z"`
		ZUncond []float32 `json:"z_uncond"`
		CFG     []float32 `json:"cfg"`
		XT      []float32 `json:"x_t"`
		T       []float32 `json:"t"`
		X0      []float32 `json:"x0"`
		Runs    map[string]struct {
			XT     []float64 `json:"x_T"`
			Eps    []float64 `json:"eps"`
			Tokens []float64 `json:"tokens"`
		} `json:"runs"`
	}
	readJSON(t, filepath.Join(dir, "parity.json"), &fx)
	var spec mar.DistilledHeadSpec
	readJSON(t, filepath.Join(dir, "entry.json"), &spec)
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	m := &mar.Manifest{Format: "marspec-pack/1", Name: "toy", TokenDim: fx.Dim, Width: fx.Width, DistilledHead: &spec}
	m.Diffusion.Schedule, m.Diffusion.TrainingSteps, m.Diffusion.SamplingSteps, m.Diffusion.ClipX0 = "cosine", 1000, 50, true
	data, err := os.ReadFile(filepath.Join(dir, spec.File))
	if err != nil {
		t.Fatal(err)
	}
	h, err := mar.NewONNXDistilledHead(data, m, onnxrt.SessionOptions{IntraOpThreads: 1}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n, D, W := fx.N, fx.Dim, fx.Width
	x0 := make([]float32, n*D)
	if err := h.Predict(fx.XT, fx.T, fx.Z, fx.ZUncond, fx.CFG, n, x0); err != nil {
		t.Fatal(err)
	}
	compare(t, "one call", x0, fx.X0)
	model := &mar.Model{Manifest: m, Distilled: h}
	for _, k := range spec.Steps {
		run, ok := fx.Runs[strconv.Itoa(k)]
		if !ok {
			t.Fatalf("parity.json has no %d-step run", k)
		}
		den, err := model.NewDenoiser(mar.Options{Steps: k, Sampler: diffusion.Distilled, Temperature: 1}, false)
		if err != nil {
			t.Fatal(err)
		}
		rows := make([]mar.DenoiseRow, n)
		for r := range rows {
			noise := &diffusion.TokenNoise{XT: run.XT[r*D : (r+1)*D], Eps: make([][]float64, k)}
			for i := range noise.Eps {
				noise.Eps[i] = run.Eps[(i*n+r)*D : (i*n+r+1)*D]
			}
			rows[r] = mar.DenoiseRow{Z: fx.Z[r*W : (r+1)*W], CFG: float64(fx.CFG[r]), Noise: noise}
			if fx.CFG[r] != 1 { // unguided rows: the sampler passes z twice and scale 1 itself
				rows[r].ZUncond = fx.ZUncond[r*W : (r+1)*W]
			}
		}
		got := mar.Rows(n, D)
		if err := den.Run(rows, got, nil); err != nil {
			t.Fatal(err)
		}
		flat := make([]float32, 0, n*D)
		for _, row := range got {
			for _, v := range row {
				flat = append(flat, float32(v))
			}
		}
		want := make([]float32, len(run.Tokens))
		for i, v := range run.Tokens {
			want[i] = float32(v)
		}
		compare(t, strconv.Itoa(k)+"-step tokens", flat, want)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}

func compare(t *testing.T, name string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, PyTorch %d", name, len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
	}
	t.Logf("%s: max |ONNX Runtime - PyTorch| %.2g", name, worst)
	if worst > tolerance {
		t.Errorf("%s differs from PyTorch by %g (allowed %g)", name, worst, tolerance)
	}
}
