package fid

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// BenchmarkFrechet2048 times one FID between the statistics of n random 2048-d features per
// side: n = 500 (rank 499, a quick run's) and n = 4096 (full rank, as at N = 50,000).
// go test ./fid -run '^$' -bench Frechet2048 -benchtime 1x
func BenchmarkFrechet2048(b *testing.B) {
	const d = 2048
	for _, n := range []int{500, 4096} {
		mu1, s1 := randomStats(n, d, 1)
		mu2, s2 := randomStats(n, d, 2)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for range b.N {
				if _, err := Frechet(mu1, s1, mu2, s2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func randomStats(n, d int, seed uint64) ([]float64, *mat.SymDense) {
	rng := rand.New(rand.NewPCG(seed, 7))
	acc := NewAccumulator(d)
	row := make([]float64, d)
	for range n {
		for j := range row {
			row[j] = rng.NormFloat64() + 0.1*float64(j%7)
		}
		if err := acc.Add(row); err != nil {
			panic(err)
		}
	}
	s, err := acc.Covariance()
	if err != nil {
		panic(err)
	}
	return acc.Mean, s
}
