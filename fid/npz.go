package fid

import (
	"fmt"
	"io"
	"os"

	"codeberg.org/sbinet/npyio/npz"
	"gonum.org/v1/gonum/mat"
)

// Stats are FID reference statistics: mean and covariance of features, stored as `mu` and
// `sigma` in an .npz file like the common FID tools do (members mu.npy, sigma.npy). Partial statistics (for sharded runs)
// also carry `n` and the co-moment matrix `m2`, so shards merge exactly.
type Stats struct {
	Mu    []float64
	Sigma *mat.SymDense
}

// WriteStats writes the final statistics of acc (mu, sigma) plus n and m2 for merging.
func WriteStats(path string, acc *Accumulator) error {
	sigma, err := acc.Covariance()
	if err != nil {
		return err
	}
	return npz.Write(path, map[string]any{
		"mu.npy":    acc.Mean,
		"sigma.npy": mat.DenseCopyOf(sigma),
		"n.npy":     []int64{int64(acc.N)},
		"m2.npy":    mat.DenseCopyOf(acc.M2),
	})
}

// ReadStats reads `mu` and `sigma` from an .npz file (any FID tool's reference statistics).
func ReadStats(path string) (*Stats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read statistics: %v", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read statistics: %v", path, err)
	}
	return ReadStatsFrom(f, st.Size(), path)
}

// ReadStatsFrom reads statistics from .npz bytes; path names them in errors.
func ReadStatsFrom(data io.ReaderAt, size int64, path string) (*Stats, error) {
	f, err := npz.NewReader(data, size)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read statistics: %v", path, err)
	}
	var mu []float64
	if err := f.Read("mu.npy", &mu); err != nil {
		return nil, fmt.Errorf("%s: no readable mu: %v", path, err)
	}
	var sigma mat.Dense
	if err := f.Read("sigma.npy", &sigma); err != nil {
		return nil, fmt.Errorf("%s: no readable sigma: %v", path, err)
	}
	r, c := sigma.Dims()
	if r != len(mu) || c != len(mu) {
		return nil, fmt.Errorf("%s: sigma is %dx%d but mu has %d values", path, r, c, len(mu))
	}
	sym := mat.NewSymDense(r, nil)
	for i := 0; i < r; i++ {
		for j := i; j < r; j++ {
			sym.SetSym(i, j, (sigma.At(i, j)+sigma.At(j, i))/2)
		}
	}
	return &Stats{Mu: mu, Sigma: sym}, nil
}

// ReadPartial reads statistics written by WriteStats back into an accumulator.
func ReadPartial(path string) (*Accumulator, error) {
	f, err := npz.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read statistics: %v", path, err)
	}
	defer f.Close()
	var mu []float64
	var n []int64
	var m2 mat.Dense
	if err := f.Read("mu.npy", &mu); err != nil {
		return nil, fmt.Errorf("%s: no readable mu: %v", path, err)
	}
	if err := f.Read("n.npy", &n); err != nil || len(n) != 1 {
		return nil, fmt.Errorf("%s: not partial statistics (no n; written by another tool?)", path)
	}
	if err := f.Read("m2.npy", &m2); err != nil {
		return nil, fmt.Errorf("%s: not partial statistics (no m2): %v", path, err)
	}
	d := len(mu)
	if r, c := m2.Dims(); r != d || c != d {
		return nil, fmt.Errorf("%s: m2 is %dx%d but mu has %d values", path, r, c, d)
	}
	acc := NewAccumulator(d)
	acc.N, acc.Mean = int(n[0]), mu
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			acc.M2.SetSym(i, j, m2.At(i, j))
		}
	}
	return acc, nil
}
