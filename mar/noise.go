package mar

import (
	"runtime"
	"sync"

	"marspec/diffusion"
)

// noiseRowsPerWorker: rows a goroutine draws at least; below it one goroutine draws them all.
const noiseRowsPerWorker = 8

// drawNoise sets rows[r].Noise = draw(r) for every row, on up to GOMAXPROCS goroutines. Each
// token's noise is a stream of its own (diffusion.NewTokenNoise), so the order of drawing
// changes nothing. At MAR's 100 diffusion steps a token's 1,616 normals take about 12 µs, and a
// batch of 64 images draws 16,384 of them: time the device would wait for on one core.
func drawNoise(rows []DenoiseRow, draw func(r int) *diffusion.TokenNoise) {
	workers := min(runtime.GOMAXPROCS(0), len(rows)/noiseRowsPerWorker)
	if workers <= 1 {
		for r := range rows {
			rows[r].Noise = draw(r)
		}
		return
	}
	per := (len(rows) + workers - 1) / workers
	var wg sync.WaitGroup
	for start := 0; start < len(rows); start += per {
		end := min(start+per, len(rows))
		wg.Go(func() {
			for r := start; r < end; r++ {
				rows[r].Noise = draw(r)
			}
		})
	}
	wg.Wait()
}
