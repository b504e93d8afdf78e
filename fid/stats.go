// Package fid computes FID and Inception Score from the features and class probabilities of an
// evaluator network, with streaming, mergeable statistics so large runs never hold all
// features in memory and sharded runs combine exactly.
package fid

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Accumulator keeps the running mean and co-moment matrix of feature vectors in float64
// (Welford's update; shards merge with Chan et al.'s formula, exactly up to rounding).
type Accumulator struct {
	Dim  int
	N    int
	Mean []float64
	M2   *mat.SymDense // sum of (x - mean)(x - mean)^T
}

// NewAccumulator starts empty statistics of dim-dimensional features.
func NewAccumulator(dim int) *Accumulator {
	return &Accumulator{Dim: dim, Mean: make([]float64, dim), M2: mat.NewSymDense(dim, nil)}
}

// Add folds one feature vector in. NaN or infinite values are refused.
func (a *Accumulator) Add(x []float64) error {
	if len(x) != a.Dim {
		return fmt.Errorf("feature has %d values, statistics have dimension %d", len(x), a.Dim)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("feature value %d is %v", i, v)
		}
	}
	a.N++
	delta := make([]float64, a.Dim)
	for i, v := range x {
		delta[i] = v - a.Mean[i]
		a.Mean[i] += delta[i] / float64(a.N)
	}
	after := make([]float64, a.Dim)
	for i, v := range x {
		after[i] = v - a.Mean[i]
	}
	// M2 += delta * after^T is symmetric in expectation; use the symmetric rank-2 form
	// 0.5*(delta after^T + after delta^T) to keep M2 exactly symmetric.
	a.M2.RankTwo(a.M2, 0.5, mat.NewVecDense(a.Dim, delta), mat.NewVecDense(a.Dim, after))
	return nil
}

// Merge folds another accumulator's statistics in (for sharded runs).
func (a *Accumulator) Merge(b *Accumulator) error {
	if a.Dim != b.Dim {
		return fmt.Errorf("cannot merge statistics of dimension %d into %d", b.Dim, a.Dim)
	}
	if b.N == 0 {
		return nil
	}
	n := a.N + b.N
	delta := make([]float64, a.Dim)
	for i := range delta {
		delta[i] = b.Mean[i] - a.Mean[i]
	}
	// M2 = M2a + M2b + delta delta^T * na*nb/n
	m2 := mat.NewSymDense(a.Dim, nil)
	m2.AddSym(a.M2, b.M2)
	m2.SymRankOne(m2, float64(a.N)*float64(b.N)/float64(n), mat.NewVecDense(a.Dim, delta))
	for i := range a.Mean {
		a.Mean[i] += delta[i] * float64(b.N) / float64(n)
	}
	a.N, a.M2 = n, m2
	return nil
}

// Covariance is the unbiased sample covariance (numpy's np.cov default, ddof = 1).
func (a *Accumulator) Covariance() (*mat.SymDense, error) {
	if a.N < 2 {
		return nil, fmt.Errorf("need at least 2 feature vectors for a covariance, have %d", a.N)
	}
	c := mat.NewSymDense(a.Dim, nil)
	c.ScaleSym(1/float64(a.N-1), a.M2)
	return c, nil
}
