package mar

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"marspec/diffusion"
)

// TestDrawNoiseSameAsOneByOne: the rows' noise drawn on several goroutines is each row's own
// stream, as drawing them one by one gives it, every row drawn once (run with -race).
func TestDrawNoiseSameAsOneByOne(t *testing.T) {
	for _, n := range []int{0, 1, noiseRowsPerWorker - 1, 3*noiseRowsPerWorker + 5, 100} {
		rows := make([]DenoiseRow, n)
		var calls atomic.Int64
		drawNoise(rows, func(r int) *diffusion.TokenNoise {
			calls.Add(1)
			return diffusion.NewTokenNoise(9, r, 2*r, 5, 4)
		})
		if calls.Load() != int64(n) {
			t.Errorf("%d rows: %d draws, want one per row", n, calls.Load())
		}
		for r, row := range rows {
			want := diffusion.NewTokenNoise(9, r, 2*r, 5, 4)
			if row.Noise == nil || !slices.Equal(row.Noise.XT, want.XT) || !slices.EqualFunc(row.Noise.Eps, want.Eps, slices.Equal) {
				t.Fatalf("%d rows: row %d's noise differs from its own stream's", n, r)
			}
		}
	}
}

// BenchmarkDrawNoise: a late AR step of MAR-B at batch 64 (512 tokens, 100 diffusion steps of
// 16 dims), drawn one by one and by drawNoise.
func BenchmarkDrawNoise(b *testing.B) {
	const rows, steps, dim = 512, 100, 16
	draw := func(r int) *diffusion.TokenNoise { return diffusion.NewTokenNoise(1, r/8, r, steps, dim) }
	out := make([]DenoiseRow, rows)
	b.Run(fmt.Sprintf("one-by-one/%d", rows), func(b *testing.B) {
		for b.Loop() {
			for r := range out {
				out[r].Noise = draw(r)
			}
		}
	})
	b.Run(fmt.Sprintf("drawNoise/%d", rows), func(b *testing.B) {
		for b.Loop() {
			drawNoise(out, draw)
		}
	})
}
