package mar

import (
	"slices"
	"testing"

	"marspec/diffusion"
	"marspec/onnxrt"
)

// With IO binding forced on (as on CUDA), the per-step head samples the tokens and traces of
// the copying path bit for bit, and it really runs bound: z is bound once per denoiser call,
// x_t and t once per step, one bound run and one read per step, and no unbound head call.
func TestBoundHeadMatchesCopies(t *testing.T) {
	m := openPack(t, "../models/target")
	head := m.Head.(*ONNXHead)
	const n, steps = 5, 13
	D, W := m.Manifest.TokenDim, m.Manifest.Width
	z, zu := conditioning(t, m, n, 3)
	for _, guided := range []bool{false, true} {
		den, err := m.NewDenoiser(Options{Steps: steps, Temperature: 0.9}, false)
		if err != nil {
			t.Fatal(err)
		}
		den.PerStep = true
		rows := denoiseRows(z, zu, n, W, steps, D, guided, 11)
		want, got := Rows(n, D), Rows(n, D)
		wantTr, gotTr := make([]diffusion.Trace, n), make([]diffusion.Trace, n)
		head.useBinding = false
		if err := den.Run(rows, want, wantTr); err != nil {
			t.Fatal(err)
		}
		head.useBinding = true
		before := onnxrt.ReadBindingStats()
		if err := den.Run(rows, got, gotTr); err != nil {
			t.Fatal(err)
		}
		after := onnxrt.ReadBindingStats()
		for r := range want {
			if !slices.Equal(want[r], got[r]) || !slices.Equal(wantTr[r].LastMean, gotTr[r].LastMean) ||
				!slices.Equal(wantTr[r].LastLogVar, gotTr[r].LastLogVar) || wantTr[r].SumHalfLogVar != gotTr[r].SumHalfLogVar {
				t.Fatalf("guided=%v row %d: the bound head's token or trace differs from the copying head's\nbound   %v\ncopying %v",
					guided, r, got[r], want[r])
			}
		}
		runs, uploads, reads := after.Runs-before.Runs, after.Uploads-before.Uploads, after.Reads-before.Reads
		if runs != steps || uploads != 1+2*steps || reads != steps {
			t.Errorf("guided=%v: %d bound runs, %d Go slices bound, %d reads; want %d runs, %d bound (z once, x_t and t per step), %d reads",
				guided, runs, uploads, reads, steps, 1+2*steps, steps)
		}
	}
}

// Whole images on the embedded target pack are identical with IO binding forced on and off,
// guided and unguided, and the bound run really took the bound path.
func TestImagesSameWithIOBinding(t *testing.T) {
	m := openPack(t, "../models/target")
	head := m.Head.(*ONNXHead)
	head.useLoop = false // the per-step head is the bound one
	for _, opt := range []Options{
		{Seed: 5, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, NumIter: 4, Steps: 20},
		{Seed: 6, CFG: 1, Temperature: 0.95, NumIter: 4, Steps: 20},
	} {
		classes := []int{1, 3}
		head.useBinding = false
		want, err := m.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		head.useBinding = true
		before := onnxrt.ReadBindingStats()
		got, err := m.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		if runs := onnxrt.ReadBindingStats().Runs - before.Runs; runs < int64(opt.Steps) {
			t.Errorf("cfg %g: %d bound head runs with binding on, want at least %d (one AR step's)", opt.CFG, runs, opt.Steps)
		}
		for i := range want {
			if !slices.Equal(want[i].Tokens, got[i].Tokens) || !slices.Equal(want[i].Pixels, got[i].Pixels) {
				t.Errorf("cfg %g image %d: tokens or pixels differ with IO binding on", opt.CFG, i)
			}
		}
	}
}
