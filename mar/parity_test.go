package mar

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"marspec/diffusion"
	"marspec/onnxrt"
)

// parityFixture is written by scripts/tests/make_fixtures.py from the checkpoint the embedded target
// pack was exported from.
type parityFixture struct {
	TokenDim      int `json:"token_dim"`
	SeqLen        int `json:"seq_len"`
	Width         int
	SamplingSteps int `json:"sampling_steps"`
	Transformer   struct {
		Batch     int
		Tokens    []float32
		Mask      []float32
		ClassIDs  []int64   `json:"class_ids"`
		DropClass []float32 `json:"drop_class"`
		Z         []float32
	}
	Head struct {
		N   int
		XT  []float32 `json:"x_t"`
		T   []float32
		Z   []float32
		Out []float32
	}
	Trajectories []struct {
		CFG, Temperature float64
		ClipX0           bool      `json:"clip_x0"`
		Z                []float32 `json:"z"`
		ZUncond          []float32 `json:"z_uncond"`
		XT               []float64 `json:"x_T"`
		Noise            []float64
		X0               []float64 `json:"x0"`
		LastMean         []float64 `json:"last_mean"`
		LastLogVar       []float64 `json:"last_logvar"`
	}
}

const parityTol = 1e-4

func loadParity(t *testing.T) (*parityFixture, *Model) {
	t.Helper()
	data, err := os.ReadFile("testdata/parity_target.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx parityFixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	if err := onnxrt.Init("../"+onnxrt.DefaultLib, onnxrt.CPU); err != nil {
		t.Fatalf("%v (make test runs make setup first)", err)
	}
	pack, err := LoadPackDir("../models/target")
	if err != nil {
		t.Fatal(err)
	}
	m, err := pack.Open(onnxrt.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &fx, m
}

func maxAbsDiff32(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func maxAbsDiff64(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

func TestTransformerMatchesPyTorch(t *testing.T) {
	fx, m := loadParity(t)
	tr := fx.Transformer
	z := make([]float32, len(tr.Z))
	if err := m.Transformer.Forward(tr.Tokens, tr.Mask, tr.ClassIDs, tr.DropClass, tr.Batch, z); err != nil {
		t.Fatal(err)
	}
	t.Logf("transformer max abs error %.3g", maxAbsDiff32(z, tr.Z))
	if d := maxAbsDiff32(z, tr.Z); d > parityTol {
		t.Fatalf("transformer: max abs error %g > %g", d, parityTol)
	}
	// rows with different numbers of known tokens in one batch equal the rows run alone
	L, W := fx.SeqLen, fx.Width
	one := make([]float32, L*W)
	if err := m.Transformer.Forward(tr.Tokens[L*fx.TokenDim:], tr.Mask[L:], tr.ClassIDs[1:], tr.DropClass[1:], 1, one); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff32(one, z[L*W:]); d > parityTol {
		t.Fatalf("row 1 alone differs from row 1 in a batch by %g", d)
	}
}

func TestHeadMatchesPyTorch(t *testing.T) {
	fx, m := loadParity(t)
	h := fx.Head
	out := make([]float32, len(h.Out))
	if err := m.Head.Predict(h.XT, h.T, h.Z, h.N, out); err != nil {
		t.Fatal(err)
	}
	t.Logf("head max abs error %.3g", maxAbsDiff32(out, h.Out))
	if d := maxAbsDiff32(out, h.Out); d > parityTol {
		t.Fatalf("head: max abs error %g > %g", d, parityTol)
	}
}

// A whole reverse diffusion with a fixed noise sequence, through ONNX and the Go sampler,
// equals the PyTorch sampler's (with and without guidance and temperature).
func TestTrajectoryMatchesPyTorch(t *testing.T) {
	fx, m := loadParity(t)
	D, W, steps := fx.TokenDim, fx.Width, fx.SamplingSteps
	for _, tj := range fx.Trajectories {
		den, err := m.NewDenoiser(Options{Steps: steps, Temperature: tj.Temperature}, false)
		if err != nil {
			t.Fatal(err)
		}
		den.Options.ClipX0 = tj.ClipX0
		rows := make([]DenoiseRow, 2)
		for r := range rows {
			noise := &diffusion.TokenNoise{XT: tj.XT[r*D : (r+1)*D], Eps: make([][]float64, steps)}
			for s := 0; s < steps; s++ {
				noise.Eps[s] = tj.Noise[(s*2+r)*D : (s*2+r+1)*D]
			}
			rows[r] = DenoiseRow{Z: tj.Z[r*W : (r+1)*W], CFG: tj.CFG, Noise: noise}
			if tj.CFG != 1 {
				rows[r].ZUncond = tj.ZUncond[r*W : (r+1)*W]
			}
		}
		x0 := Rows(2, D)
		traces := make([]diffusion.Trace, 2)
		if err := den.Run(rows, x0, traces); err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			t.Logf("cfg %g temperature %g row %d: final token max abs error %.3g", tj.CFG, tj.Temperature, r, maxAbsDiff64(x0[r], tj.X0[r*D:(r+1)*D]))
			if d := maxAbsDiff64(x0[r], tj.X0[r*D:(r+1)*D]); d > parityTol {
				t.Errorf("cfg %g temperature %g row %d: final token max abs error %g > %g", tj.CFG, tj.Temperature, r, d, parityTol)
			}
			last := traces[r]
			if d := maxAbsDiff64(last.LastLogVar, tj.LastLogVar[r*D:(r+1)*D]); d > parityTol {
				t.Errorf("row %d: last-step log-variance error %g", r, d)
			}
			if d := maxAbsDiff64(last.LastMean, tj.LastMean[r*D:(r+1)*D]); d > parityTol {
				t.Errorf("row %d: last-step mean error %g", r, d)
			}
			lp := diffusion.GaussianLogDensity(x0[r], last.LastMean, last.LastLogVar)
			if math.IsNaN(lp) || math.IsInf(lp, 0) {
				t.Errorf("row %d: log density of the last step is %v", r, lp)
			}
		}
	}
}
