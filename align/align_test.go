package align

import (
	"math"
	"math/rand/v2"
	"testing"

	"marspec/diffusion"
)

// Theorem 1: with shared noise E||x_q - x_p||^2 drops by 2 tr(sqrt(Sigma_q Sigma_p)).
// Diagonal covariances, 4 dimensions, 200000 draws; tolerance 2% of the predicted drop.
func TestSharedNoiseReducesDistance(t *testing.T) {
	muQ, muP := []float64{0.1, -0.3, 0.5, 0}, []float64{0.2, -0.1, 0.4, 0.3}
	sdQ, sdP := []float64{0.5, 1.0, 0.2, 0.8}, []float64{0.7, 0.9, 0.4, 0.3}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	var shared, independent float64
	for i := 0; i < n; i++ {
		for d := range muQ {
			e1, e2 := rng.NormFloat64(), rng.NormFloat64()
			a := muQ[d] + sdQ[d]*e1
			shared += sq(a - (muP[d] + sdP[d]*e1))
			independent += sq(a - (muP[d] + sdP[d]*e2))
		}
	}
	drop := (independent - shared) / n
	want := 0.0
	for d := range sdQ {
		want += 2 * sdQ[d] * sdP[d] // tr sqrt(Sigma_q Sigma_p) for diagonal covariances
	}
	if math.Abs(drop-want) > 0.02*want {
		t.Fatalf("shared noise reduced the distance by %.4f, theorem says %.4f", drop, want)
	}
}

func sq(x float64) float64 { return x * x }

// For two Gaussians with equal variance the exact criterion accepts with probability
// 1 - TV = 2 Phi(-|delta| / (2 sd)). 200000 draws, tolerance 0.005 (~4 standard errors).
func TestAlphaMatchesClosedForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, delta := range []float64{0.1, 0.5, 1.5} {
		sd := 0.8
		q := Run{Trace: diffusion.Trace{LastMean: []float64{0}, LastLogVar: []float64{2 * math.Log(sd)}}}
		p := Run{Trace: diffusion.Trace{LastMean: []float64{delta}, LastLogVar: []float64{2 * math.Log(sd)}}}
		const n = 200000
		accepted := 0
		for i := 0; i < n; i++ {
			x := []float64{sd * rng.NormFloat64()}
			logR, _ := LogRatio(Exact, q, p, x)
			if math.Log(rng.Float64()) < logR {
				accepted++
			}
		}
		got := float64(accepted) / n
		want := math.Erfc(delta / (2 * sd) / math.Sqrt2) // 2 Phi(-z) = erfc(z / sqrt 2)
		if math.Abs(got-want) > 0.005 {
			t.Errorf("delta %.1f: alpha %.4f, closed form %.4f", delta, got, want)
		}
	}
}

func TestLogSigma(t *testing.T) {
	noise := &diffusion.TokenNoise{XT: []float64{0.5}, Eps: [][]float64{{1}, {2}, {0.3}}}
	q := Run{Trace: diffusion.Trace{SumHalfLogVar: -3}, Noise: noise}
	p := Run{Trace: diffusion.Trace{SumHalfLogVar: -4}, Noise: noise}
	if got := LogSigma(q, p); got != 1 {
		t.Fatalf("log Sigma %g, want 1", got)
	}
	// the paper's criterion: log Sigma + log p(x0|x1^p) - log q(x0|x1^q)
	q.Trace.LastMean, q.Trace.LastLogVar = []float64{0}, []float64{0}
	p.Trace.LastMean, p.Trace.LastLogVar = []float64{1}, []float64{0}
	logR, logSigma := LogRatio(Paper, q, p, []float64{0.5})
	if logSigma != 1 || math.Abs(logR-1) > 1e-12 { // the two densities are equal at 0.5
		t.Fatalf("paper log ratio %g (log Sigma %g), want 1", logR, logSigma)
	}
	if logR, logSigma = LogRatio(Exact, q, p, []float64{0.5}); logSigma != 0 || math.Abs(logR) > 1e-12 {
		t.Fatalf("exact log ratio %g, want 0", logR)
	}
}

func TestNoiseAlignment(t *testing.T) {
	a := Noise{Seed: 9, Aligned: true, Steps: 5, Dim: 3}
	if a.Draft(2, 7) == nil || a.Draft(2, 7).XT[0] != a.Target(2, 7).XT[0] || a.Draft(2, 7).Eps[4][2] != a.Target(2, 7).Eps[4][2] {
		t.Fatal("aligned draft and target noise differ")
	}
	u := a
	u.Aligned = false
	if u.Draft(2, 7).XT[0] == u.Target(2, 7).XT[0] {
		t.Fatal("unaligned draft reuses the target's noise")
	}
	if a.Target(2, 7).XT[0] == a.Target(2, 8).XT[0] || a.Target(2, 7).XT[0] == a.Target(3, 7).XT[0] {
		t.Fatal("positions or images share noise")
	}
}
