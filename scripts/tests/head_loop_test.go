package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"marspec/diffusion"
	"marspec/mar"
	"marspec/onnxrt"
)

// headLoopTolerance is the largest difference allowed between the fused head's tokens and the
// per-step head's, relative to the token's largest value where that is over 1 (scaledDiff).
// Both run the same float32 head and the same float64 step arithmetic, and at this pack's head
// width they agree to the bit; at MAR-B's (1024) ONNX Runtime sums the loop body's products in
// another order (with weight prepacking off in both sessions they agree for one row), so eps
// differs by about 2e-6 of its size, and without x0 clipping the first steps multiply eps by up
// to sqrt(1/alpha-bar - 1): random-weight tokens of size 7e4 differ by up to 0.2 (3e-6).
const headLoopTolerance = 1e-5

// TestFusedHeadOnMARLayout: make_random_packs.py gives a pack of MAR-B's layout (ci_target:
// 16x16 tokens of 16 dims, cosine schedule, learned-range variance, no x0 clipping, a MAR
// diffusion head) its fused head loop, and that loop samples what the per-step head samples:
// one denoiser call over step counts up to MAR's 100, guided and unguided, at MAR's
// temperatures, with and without a noisy last step; and whole images generated with
// MARSPEC_HEAD_LOOP=on and off, guided as MAR-B's paper preset and unguided.
func TestFusedHeadOnMARLayout(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	pack := randomPack(t, "ci_target", "")
	man, err := mar.LoadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	if man.HeadLoop == nil || man.HeadLoop.File != "head_loop.onnx" || man.HeadLoop.Format != mar.HeadLoopFormat {
		t.Fatalf("manifest head_loop %+v, want head_loop.onnx in format %s", man.HeadLoop, mar.HeadLoopFormat)
	}
	// the AdaLN modulations run once per call: shift, scale and gate of each of the head's 2
	// res blocks and shift and scale of its final layer, 32 wide (scripts/lib/mar_official.py)
	if want := (3*2 + 2) * 32; man.HeadLoop.StackedWidth != want {
		t.Fatalf("manifest head_loop stacked_width %d, want %d: the modulations were not computed once per call", man.HeadLoop.StackedWidth, want)
	}
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	fused, perStep := openWithHeadLoop(t, pack, "on"), openWithHeadLoop(t, pack, "off")
	if fused.Head.(mar.LoopHead).HeadLoop() == nil || perStep.Head.(mar.LoopHead).HeadLoop() != nil {
		t.Fatal("MARSPEC_HEAD_LOOP=on should sample through the fused head and off through the per-step head")
	}
	compareDenoisers(t, fused)
	compareImages(t, fused, perStep)
}

// compareImages generates the same images with the per-step and the fused head: MAR-B's paper
// preset (at 16 AR steps) and MAR's unguided evaluation. Pixels may differ by one grey level
// where a token's rounding differs.
func compareImages(t *testing.T, fused, perStep *mar.Model) {
	D := fused.Manifest.TokenDim
	for _, opt := range []mar.Options{
		{Seed: 5, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, NumIter: 16, Steps: 100},
		{Seed: 6, CFG: 1, Temperature: 0.95, NumIter: 16, Steps: 100},
	} {
		classes := []int{1, 207}
		want, err := perStep.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fused.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			d := 0.0
			for j := 0; j < len(want[i].Tokens); j += D {
				d = math.Max(d, scaledDiff(float64s(want[i].Tokens[j:j+D]), float64s(got[i].Tokens[j:j+D])))
			}
			pixels, worst := 0, 0
			for j := range want[i].Pixels {
				if g, w := int(got[i].Pixels[j]), int(want[i].Pixels[j]); g != w {
					pixels, worst = pixels+1, max(worst, abs(g-w))
				}
			}
			t.Logf("cfg %g image %d: tokens differ by up to %g, %d pixel values differ", opt.CFG, i, d, pixels)
			if !(d <= headLoopTolerance) || worst > 1 {
				t.Errorf("cfg %g image %d: fused head's tokens differ from the per-step head's by up to %g (allowed %g), "+
					"%d of %d pixel values differ, by up to %d grey levels (allowed 1)", opt.CFG, i, d, headLoopTolerance,
					pixels, len(want[i].Pixels), worst)
			}
		}
	}
}

func abs(x int) int { return max(x, -x) }

// openWithHeadLoop opens pack as the service does with MARSPEC_HEAD_LOOP set to loop.
func openWithHeadLoop(t *testing.T, pack, loop string) *mar.Model {
	t.Helper()
	t.Setenv("MARSPEC_HEAD_LOOP", loop)
	p, err := mar.LoadPackDir(pack)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Head.(*mar.ONNXHead).Close(); m.Transformer.(*mar.OpeningMemo).Close() })
	return m
}

// compareDenoisers runs one denoiser call both ways on real conditioning (the transformer's z
// for contexts that know a random part of an image, as mid-generation) and compares the tokens
// and the per-row traces speculative decoding reads.
func compareDenoisers(t *testing.T, m *mar.Model) {
	const n = 5
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	rng := rand.New(rand.NewPCG(7, 8))
	ctx := mar.NewContextBatch(n, L, D)
	x := make([]float64, D)
	for r := 0; r < n; r++ {
		ctx.ClassIDs[r] = int64(rng.IntN(len(m.Manifest.Classes)))
		for _, pos := range rng.Perm(L)[:rng.IntN(L)] {
			for j := range x {
				x[j] = rng.NormFloat64()
			}
			ctx.Set(r, pos, x)
		}
	}
	zAll, zuAll := make([]float32, n*L*W), make([]float32, n*L*W)
	if err := ctx.Condition(m.Transformer, zAll, zuAll); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	defer func() { t.Logf("denoiser: fused and per-step tokens differ by up to %g (scaled as scaledDiff)", worst) }()
	for _, steps := range []int{1, 2, 25, 100} {
		for _, guided := range []bool{false, true} {
			for _, temp := range []float64{1, 0.95} {
				for _, final := range []bool{false, true} {
					name := fmt.Sprintf("steps=%d guided=%v temperature=%g final-noise=%v", steps, guided, temp, final)
					den, err := m.NewDenoiser(mar.Options{Steps: steps, Temperature: temp}, final)
					if err != nil {
						t.Fatal(err)
					}
					rows := make([]mar.DenoiseRow, n)
					for r := range rows {
						pos := (r*37 + steps) % L
						rows[r] = mar.DenoiseRow{Z: zAll[(r*L+pos)*W : (r*L+pos+1)*W], CFG: 1 + 0.8*float64(r), // scales differ per row
							Noise: diffusion.NewTokenNoise(uint64(steps), r, pos, steps, D)}
						if guided {
							rows[r].ZUncond = zuAll[(r*L+pos)*W : (r*L+pos+1)*W]
						}
					}
					want, got := mar.Rows(n, D), mar.Rows(n, D)
					wantTr, gotTr := make([]diffusion.Trace, n), make([]diffusion.Trace, n)
					den.PerStep = true
					if err := den.Run(rows, want, wantTr); err != nil {
						t.Fatal(err)
					}
					den.PerStep = false
					if err := den.Run(rows, got, gotTr); err != nil {
						t.Fatal(err)
					}
					for r := range want {
						w, g := wantTr[r], gotTr[r]
						worst = math.Max(worst, scaledDiff(want[r], got[r]))
						if d := scaledDiff(want[r], got[r]); !(d <= headLoopTolerance) {
							t.Fatalf("%s: row %d token differs by %g\nper-step %v\nfused    %v", name, r, d, want[r], got[r])
						}
						if d := math.Abs(w.SumHalfLogVar - g.SumHalfLogVar); !(d <= headLoopTolerance*math.Max(1, math.Abs(w.SumHalfLogVar))) {
							t.Fatalf("%s: row %d sum of half log-variances %v vs %v", name, r, w.SumHalfLogVar, g.SumHalfLogVar)
						}
						if d := math.Max(scaledDiff(w.LastMean, g.LastMean), scaledDiff(w.LastLogVar, g.LastLogVar)); !(d <= headLoopTolerance) {
							t.Fatalf("%s: row %d last step's Gaussian differs by %g", name, r, d)
						}
					}
				}
			}
		}
	}
}

// scaledDiff is the largest |a-b| over max(1, largest |a|): absolute for a token of values up
// to 1, relative to its size above.
func scaledDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d, size := 0.0, 1.0
	for i := range a {
		d, size = math.Max(d, math.Abs(a[i]-b[i])), math.Max(size, math.Abs(a[i]))
	}
	return d / size
}

func float64s(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
