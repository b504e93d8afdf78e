package fid

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Frechet is the Frechet distance between N(mu1, sigma1) and N(mu2, sigma2):
// |mu1 - mu2|^2 + tr(sigma1) + tr(sigma2) - 2 tr((sigma1 sigma2)^(1/2)).
// The trace of the square root is computed stably as the sum of square roots of the
// eigenvalues of the symmetric matrix sqrt(sigma1) sigma2 sqrt(sigma1), which has the same
// eigenvalues as sigma1 sigma2. Eigenvalues below zero beyond rounding are reported, not
// silently dropped.
func Frechet(mu1 []float64, sigma1 mat.Symmetric, mu2 []float64, sigma2 mat.Symmetric) (float64, error) {
	d := len(mu1)
	if len(mu2) != d || sigma1.SymmetricDim() != d || sigma2.SymmetricDim() != d {
		return 0, fmt.Errorf("statistics dimensions differ: mu %d/%d, sigma %d/%d", d, len(mu2), sigma1.SymmetricDim(), sigma2.SymmetricDim())
	}
	for i := 0; i < d; i++ {
		if math.IsNaN(mu1[i]) || math.IsNaN(mu2[i]) {
			return 0, fmt.Errorf("mean has NaN at %d", i)
		}
	}
	root1, err := symSqrt(sigma1)
	if err != nil {
		return 0, fmt.Errorf("first covariance: %v", err)
	}
	var tmp, prod mat.Dense
	tmp.Mul(root1, sigma2)
	prod.Mul(&tmp, root1)
	sym := mat.NewSymDense(d, nil)
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			sym.SetSym(i, j, (prod.At(i, j)+prod.At(j, i))/2)
		}
	}
	vals, err := eigenvalues(sym)
	if err != nil {
		return 0, err
	}
	scale := 0.0
	for _, v := range vals {
		scale = math.Max(scale, math.Abs(v))
	}
	traceSqrt, tol := 0.0, rankTolerance(len(vals), scale)
	for _, v := range vals {
		if v < -1e-8*math.Max(scale, 1) {
			return 0, fmt.Errorf("covariance product has eigenvalue %g < 0: not positive semi-definite", v)
		}
		if v > tol {
			traceSqrt += math.Sqrt(v)
		}
	}
	dist, traces := 0.0, 0.0
	for i := 0; i < d; i++ {
		diff := mu1[i] - mu2[i]
		dist += diff * diff
		traces += sigma1.At(i, i) + sigma2.At(i, i)
	}
	fid := dist + traces - 2*traceSqrt
	// identical statistics land a rounding error (~1e-8 of the traces, from the eigen
	// decomposition) below zero; a distance is never negative, and 1e-6 is our stated accuracy
	if fid < 0 && fid > -1e-6*math.Max(traces, 1) {
		fid = 0
	}
	return fid, nil
}

func eigenvalues(s mat.Symmetric) ([]float64, error) {
	var eig mat.EigenSym
	if !eig.Factorize(s, false) {
		return nil, fmt.Errorf("eigen decomposition failed")
	}
	return eig.Values(nil), nil
}

// rankTolerance is the size below which an eigenvalue of a d x d symmetric matrix whose
// largest is scale is rounding, not signal (NumPy's matrix_rank rule, d * eps * largest): with
// fewer images than feature dimensions (a quick run at 2048-d) most true eigenvalues are zero,
// and the square roots of their rounding noise would otherwise add up to a visible error.
func rankTolerance(d int, scale float64) float64 {
	return float64(d) * 0x1p-52 * scale
}

// symSqrt is the symmetric positive semi-definite square root V diag(sqrt(l)) V^T.
func symSqrt(s mat.Symmetric) (*mat.Dense, error) {
	var eig mat.EigenSym
	if !eig.Factorize(s, true) {
		return nil, fmt.Errorf("eigen decomposition failed")
	}
	vals := eig.Values(nil)
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	scale := 0.0
	for _, v := range vals {
		scale = math.Max(scale, math.Abs(v))
	}
	d, tol := len(vals), rankTolerance(len(vals), scale)
	scaled := mat.DenseCopyOf(&vecs) // V diag(sqrt(l)), then times V^T
	for k, v := range vals {
		if math.IsNaN(v) {
			return nil, fmt.Errorf("covariance has NaN entries")
		}
		if v < -1e-8*math.Max(scale, 1) {
			return nil, fmt.Errorf("eigenvalue %g < 0: not positive semi-definite", v)
		}
		r := 0.0
		if v > tol {
			r = math.Sqrt(v)
		}
		for i := 0; i < d; i++ {
			scaled.Set(i, k, scaled.At(i, k)*r)
		}
	}
	root := mat.NewDense(d, d, nil)
	root.Mul(scaled, vecs.T())
	return root, nil
}
