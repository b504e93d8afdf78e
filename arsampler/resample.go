package arsampler

import (
	"math"
	"math/rand/v2"

	"marspec/diffusion"
)

// Resampled is the outcome of sampling the modified distribution.
type Resampled struct {
	X        []float64
	Tries    int
	BoundHit bool
}

// ResampleModified draws from norm(max(0, Sigma*p - q)) by acceptance-rejection with the
// target's last-step Gaussian p as proposal and the threshold of the paper's Corollary 1,
// alpha_s = max(0, Sigma*p(x) - q(x)) / (Sigma*p(x)): no network call is needed. p and q are
// the last-step Gaussians (mean, log-variance) of target and draft.
func ResampleModified(rng *rand.Rand, pMean, pLogVar, qMean, qLogVar []float64, logSigma float64, maxTries int) Resampled {
	x := make([]float64, len(pMean))
	for try := 1; ; try++ {
		for i := range x {
			x[i] = pMean[i] + math.Exp(0.5*pLogVar[i])*rng.NormFloat64()
		}
		lp := logSigma + diffusion.GaussianLogDensity(x, pMean, pLogVar)
		lq := diffusion.GaussianLogDensity(x, qMean, qLogVar)
		// alpha_s = max(0, 1 - q/(Sigma p)), in the log domain
		alpha := -math.Expm1(lq - lp)
		if rng.Float64() < alpha {
			return Resampled{X: x, Tries: try}
		}
		if try >= maxTries {
			return Resampled{X: x, Tries: try, BoundHit: true}
		}
	}
}
