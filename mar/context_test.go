package mar

import (
	"math"
	"math/rand"
	"testing"
)

// One doubled call gives the z of the two separate calls (class, then "no class") it replaces,
// and later calls reuse its buffers.
func TestConditionOneCallMatchesTwo(t *testing.T) {
	m, tr, _ := openTarget(t)
	L, D, W := m.SeqLen(), m.TokenDim, m.Width
	for _, rows := range []int{1, 5} {
		rng := rand.New(rand.NewSource(int64(rows)))
		ctx := NewContextBatch(rows, L, D)
		x := make([]float64, D)
		for r := 0; r < rows; r++ {
			ctx.ClassIDs[r] = int64(rng.Intn(len(m.Classes)))
			for _, pos := range rng.Perm(L)[:rng.Intn(L)] { // rows know different numbers of tokens
				for j := range x {
					x[j] = rng.Float64()*2 - 1
				}
				ctx.Set(r, pos, x)
			}
		}
		want, wantU := nanSlice(rows*L*W), nanSlice(rows*L*W)
		drop, dropAll := make([]float32, rows), make([]float32, rows)
		for i := range dropAll {
			dropAll[i] = 1
		}
		if err := tr.Forward(ctx.Tokens, ctx.Mask, ctx.ClassIDs, drop, rows, want); err != nil {
			t.Fatal(err)
		}
		if err := tr.Forward(ctx.Tokens, ctx.Mask, ctx.ClassIDs, dropAll, rows, wantU); err != nil {
			t.Fatal(err)
		}
		z, zu := nanSlice(rows*L*W), nanSlice(rows*L*W)
		if err := ctx.Condition(tr, z, zu); err != nil {
			t.Fatal(err)
		}
		checkClose(t, "z", want, z)
		checkClose(t, "zUncond", wantU, zu)
		if d := maxAbsDiff(want, wantU); d < 1e-3 {
			t.Fatalf("class and no-class z differ by only %g: the test cannot tell the halves apart", d)
		}
		buf := &ctx.z2[0]
		if err := ctx.Condition(tr, z, zu); err != nil {
			t.Fatal(err)
		}
		if &ctx.z2[0] != buf {
			t.Error("a second guided call reallocated the doubled batch")
		}
		// the runtime binding allocates a little per call; guidance must add nothing to it
		plain := testing.AllocsPerRun(3, func() { ctx.Condition(tr, z, nil) })
		if guided := testing.AllocsPerRun(3, func() { ctx.Condition(tr, z, zu) }); guided > plain {
			t.Errorf("a guided call allocates %v times, an unguided one %v", guided, plain)
		}
	}
}

func checkClose(t *testing.T, what string, want, got []float32) {
	t.Helper()
	if d := maxAbsDiff(want, got); !(d <= 1e-5) {
		t.Fatalf("%s: one doubled call differs from two calls by %g", what, d)
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}
