package mar

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"marspec/diffusion"
	"marspec/onnxrt"
)

// openPack opens a committed pack with every graph, skipping without the runtime.
func openPack(t *testing.T, dir string) *Model {
	t.Helper()
	needRuntime(t)
	p, err := LoadPackDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Head.(*ONNXHead).Close(); m.Transformer.(*OpeningMemo).Close() })
	return m
}

// conditioning returns real z (and uncond z) for n rows: the transformer's output on
// contexts that know a random part of a random image, as mid-generation.
func conditioning(t *testing.T, m *Model, n int, seed int64) (z, zu []float32) {
	t.Helper()
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	rng := rand.New(rand.NewSource(seed))
	ctx := NewContextBatch(n, L, D)
	x := make([]float64, D)
	for r := 0; r < n; r++ {
		ctx.ClassIDs[r] = int64(rng.Intn(len(m.Manifest.Classes)))
		for _, pos := range rng.Perm(L)[:rng.Intn(L)] {
			for j := range x {
				x[j] = rng.Float64()*2 - 1
			}
			ctx.Set(r, pos, x)
		}
	}
	zAll, zuAll := make([]float32, n*L*W), make([]float32, n*L*W)
	if err := ctx.Condition(m.Transformer, zAll, zuAll); err != nil {
		t.Fatal(err)
	}
	z, zu = make([]float32, n*W), make([]float32, n*W)
	for r := 0; r < n; r++ { // one position per row
		pos := rng.Intn(L)
		copy(z[r*W:], zAll[(r*L+pos)*W:(r*L+pos+1)*W])
		copy(zu[r*W:], zuAll[(r*L+pos)*W:(r*L+pos+1)*W])
	}
	return z, zu
}

func denoiseRows(z, zu []float32, n, width, steps, dim int, guided bool, seed uint64) []DenoiseRow {
	rows := make([]DenoiseRow, n)
	for r := range rows {
		rows[r] = DenoiseRow{Z: z[r*width : (r+1)*width], CFG: 1 + 0.7*float64(r%5), // scales differ per row
			Noise: diffusion.NewTokenNoise(seed, r, 3*r, steps, dim)}
		if guided {
			rows[r].ZUncond = zu[r*width : (r+1)*width]
		}
	}
	return rows
}

// The fused graph gives the tokens, last-step Gaussians and log-determinant sums of the
// per-step path, over the settings that change the arithmetic.
func TestFusedMatchesPerStep(t *testing.T) {
	for _, pack := range []string{"../models/target", "../models/draft"} {
		m := openPack(t, pack)
		h := m.Head.(*ONNXHead)
		if h.loop.ifOpened() != nil {
			t.Fatalf("%s: the fused graph was opened on the CPU, which samples without it", pack)
		}
		if loop, err := h.FusedLoop(); err != nil || loop == nil {
			t.Fatalf("%s: the fused graph did not open on first use: %v", pack, err)
		}
		h.useLoop = true // the CPU default is the per-step path
		if h.HeadLoop() == nil {
			t.Fatalf("%s: the pack has no head_loop graph", pack)
		}
		const n = 6
		D, W := m.Manifest.TokenDim, m.Manifest.Width
		z, zu := conditioning(t, m, n, 7)
		for _, steps := range []int{1, 2, 13, 50} {
			for _, guided := range []bool{false, true} {
				for _, temp := range []float64{1, 0.9} {
					for _, final := range []bool{false, true} {
						name := fmt.Sprintf("%s steps=%d guided=%v temp=%g final-noise=%v", pack, steps, guided, temp, final)
						opt := Options{Steps: steps, Temperature: temp}
						den, err := m.NewDenoiser(opt, final)
						if err != nil {
							t.Fatal(err)
						}
						rows := denoiseRows(z, zu, n, W, steps, D, guided, uint64(steps))
						want, got := Rows(n, D), Rows(n, D)
						wantTr, gotTr := make([]diffusion.Trace, n), make([]diffusion.Trace, n)
						den.PerStep = true
						if err := den.Run(rows, want, wantTr); err != nil {
							t.Fatal(err)
						}
						den.PerStep = false
						if err := den.Run(rows, got, gotTr); err != nil {
							t.Fatal(err)
						}
						compareTokens(t, name, want, got, wantTr, gotTr)
					}
				}
			}
		}
	}
}

func compareTokens(t *testing.T, name string, want, got [][]float64, wantTr, gotTr []diffusion.Trace) {
	t.Helper()
	const tol = 1e-5
	for r := range want {
		if d := maxDiff(want[r], got[r]); !(d <= tol) {
			t.Fatalf("%s: row %d token differs by %g\nper-step %v\nfused    %v", name, r, d, want[r], got[r])
		}
		w, g := wantTr[r], gotTr[r]
		if d := math.Abs(w.SumHalfLogVar - g.SumHalfLogVar); !(d <= tol*math.Max(1, math.Abs(w.SumHalfLogVar))) {
			t.Fatalf("%s: row %d sum of half log-variances %v vs %v", name, r, w.SumHalfLogVar, g.SumHalfLogVar)
		}
		if d := maxDiff(w.LastMean, g.LastMean); !(d <= tol) || len(g.LastMean) != len(w.LastMean) {
			t.Fatalf("%s: row %d last mean differs by %g", name, r, d)
		}
		if d := maxDiff(w.LastLogVar, g.LastLogVar); !(d <= tol) || len(g.LastLogVar) != len(w.LastLogVar) {
			t.Fatalf("%s: row %d last log-variance differs by %g", name, r, d)
		}
	}
}

func maxDiff(a, b []float64) float64 {
	d := 0.0
	if len(a) != len(b) {
		return math.Inf(1)
	}
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// Clipping off is a setting of the caller (VAE latents), not of the graph.
func TestFusedWithoutClipping(t *testing.T) {
	m := openPack(t, "../models/target")
	const n = 4
	D, W := m.Manifest.TokenDim, m.Manifest.Width
	z, zu := conditioning(t, m, n, 3)
	den, err := m.NewDenoiser(Options{Steps: 20, Temperature: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	den.Options.ClipX0 = false
	rows := denoiseRows(z, zu, n, W, 20, D, true, 5)
	want, got := Rows(n, D), Rows(n, D)
	den.PerStep = true
	if err := den.Run(rows, want, nil); err != nil {
		t.Fatal(err)
	}
	den.PerStep = false
	if err := den.Run(rows, got, nil); err != nil {
		t.Fatal(err)
	}
	compareTokens(t, "no clipping", want, got, make([]diffusion.Trace, n), make([]diffusion.Trace, n))
}

// The CPU keeps the per-step path, CUDA takes the fused graph, and the environment overrides.
func TestHeadLoopWanted(t *testing.T) {
	cuda := onnxrt.Device{CUDA: true}
	for _, c := range []struct {
		env  string
		dev  onnxrt.Device
		want bool
	}{{"", onnxrt.CPU, false}, {"", cuda, true}, {"on", onnxrt.CPU, true}, {"off", cuda, false}} {
		t.Setenv("MARSPEC_HEAD_LOOP", c.env)
		if got := headLoopWanted(c.dev); got != c.want {
			t.Errorf("MARSPEC_HEAD_LOOP=%q on %v: %v, want %v", c.env, c.dev, got, c.want)
		}
	}
}
