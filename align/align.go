// Package align holds denoising trajectory alignment: which noise the draft and target
// diffusion runs of a token use, and the log density ratio of their outputs.
package align

import (
	"fmt"

	"marspec/diffusion"
)

// Noise hands out the per-token noise of both models. Aligned, both get the same x_T and the
// same epsilon at every step (the paper's trajectory alignment); otherwise the draft draws
// from an independent stream (the ablation).
type Noise struct {
	Seed       uint64
	Aligned    bool
	Steps, Dim int
}

const draftSalt = 0x5eed

// Target is the noise of the target's run for (image, position).
func (n Noise) Target(image, pos int) *diffusion.TokenNoise {
	return diffusion.NewTokenNoise(n.Seed, image, pos, n.Steps, n.Dim)
}

// Draft is the noise of the draft's run for (image, position).
func (n Noise) Draft(image, pos int) *diffusion.TokenNoise {
	if n.Aligned {
		return n.Target(image, pos)
	}
	return diffusion.NewTokenNoiseSalted(n.Seed, draftSalt, image, pos, n.Steps, n.Dim)
}

// Criterion selects the acceptance test.
type Criterion int

const (
	// Paper is the paper's criterion: log r = log Sigma + log p(x0|x1^p) - log q(x0|x1^q),
	// with Sigma the ratio of the trajectories' step densities (Eq. 8-9).
	Paper Criterion = iota
	// Exact sets Sigma := 1: ordinary speculative sampling between the two last-step Gaussians
	// given the shared noise, which leaves the target's output distribution unchanged.
	Exact
)

// ParseCriterion reads "paper" or "exact".
func ParseCriterion(s string) (Criterion, error) {
	switch s {
	case "paper":
		return Paper, nil
	case "exact":
		return Exact, nil
	}
	return 0, fmt.Errorf("acceptance %q unknown (allowed: paper, exact)", s)
}

func (c Criterion) String() string {
	if c == Exact {
		return "exact"
	}
	return "paper"
}

// Run is one model's reverse diffusion of one token: its trace and the noise it used.
type Run struct {
	Trace diffusion.Trace
	Noise *diffusion.TokenNoise
}

// LogSigma is log Sigma between a draft run q and a target run p (Eq. 8): half the
// log-determinants of the draft's step covariances minus the target's, over every step but
// the last. With shared noise this is exactly the ratio of the two trajectories' step
// densities (the exp(-|eps|^2/2) factors cancel). Without alignment those factors differ and
// the formula is only the paper's approximation; keeping them instead would add a sum of
// 49x16 independent chi-square differences, a random walk that accepts or rejects by chance.
func LogSigma(q, p Run) float64 {
	return q.Trace.SumHalfLogVar - p.Trace.SumHalfLogVar
}

// LogRatio is the log acceptance ratio of draft token x0 (drawn by q) under the criterion,
// together with the log Sigma it used (0 for Exact).
func LogRatio(c Criterion, q, p Run, x0 []float64) (logRatio, logSigma float64) {
	if c == Paper {
		logSigma = LogSigma(q, p)
	}
	lp := diffusion.GaussianLogDensity(x0, p.Trace.LastMean, p.Trace.LastLogVar)
	lq := diffusion.GaussianLogDensity(x0, q.Trace.LastMean, q.Trace.LastLogVar)
	return logSigma + lp - lq, logSigma
}

// SquaredDistance is ||a - b||^2, the draft-target token distance of the paper's Table 4.
func SquaredDistance(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return s
}
