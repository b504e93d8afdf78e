package diffusion

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sampleGaussianData runs the reverse process over data N(mu, sd^2) with the exact noise
// predictor, n independent one-dimensional samples, and returns their mean and sd.
func sampleGaussianData(t *testing.T, steps int, opt StepOptions, mu, sd float64, n int) (float64, float64) {
	t.Helper()
	s, err := NewSchedule("cosine", 1000, steps)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, uint64(steps)))
	var sum, sum2 float64
	x, mean, logVar, noise, out := make([]float64, 1), make([]float64, 1), make([]float64, 1), make([]float64, 1), make([]float64, 1)
	eps, v := make([]float32, 1), []float32{1} // v: DDPM's learned variance at beta (unused by DDIM)
	for range n {
		x[0] = rng.NormFloat64()
		for k := steps - 1; k >= 0; k-- {
			ab := s.AlphaBar(k)
			// E[noise | x_k] for Gaussian data: the exact predictor a perfect head learns
			eps[0] = float32(math.Sqrt(1-ab) * (x[0] - math.Sqrt(ab)*mu) / (ab*sd*sd + 1 - ab))
			s.Posterior(k, x, eps, v, opt, mean, logVar)
			noise[0] = rng.NormFloat64()
			s.Step(k, mean, logVar, noise, out, opt)
			x[0] = out[0]
		}
		sum += x[0]
		sum2 += x[0] * x[0]
	}
	m := sum / float64(n)
	return m, math.Sqrt(sum2/float64(n) - m*m)
}

// DDIM with the exact predictor draws the data's law when its steps are fine: deterministic
// (eta 0) and with the DDPM posterior's noise (eta 1), on the 1000 training steps. N = 4,000
// one-dimensional samples from N(0.3, 0.5^2): the mean's sampling error is 0.5/sqrt(4000) =
// 0.008 and the sd's about 0.006; the tolerances are 0.03 and 0.02. Respaced to few steps the
// law is narrower (measured: eta 1 sd 0.38 at 10 steps, 0.46 at 50, 0.49 at 200; eta 0 0.42,
// 0.49, 0.49): what is asserted there is only that the error shrinks with the steps.
func TestDDIMDrawsTheDataLaw(t *testing.T) {
	const mu, sd, n = 0.3, 0.5, 4000
	for _, eta := range []float64{0, 1} {
		opt := StepOptions{Sampler: SamplerDDIM, Eta: eta}
		m, s := sampleGaussianData(t, 1000, opt, mu, sd, n)
		if math.Abs(m-mu) > 0.03 || math.Abs(s-sd) > 0.02 {
			t.Errorf("eta %g, 1000 steps: mean %.4f sd %.4f, want %.1f and %.1f", eta, m, s, mu, sd)
		}
		_, s10 := sampleGaussianData(t, 10, opt, mu, sd, n)
		_, s200 := sampleGaussianData(t, 200, opt, mu, sd, n)
		if !(math.Abs(s200-sd) < math.Abs(s10-sd)) {
			t.Errorf("eta %g: sd error at 200 steps (%.4f) not below that at 10 (%.4f)", eta, s200, s10)
		}
	}
}

// eta 0 is deterministic: the same start gives the same end whatever the noise, and every
// step's log-variance is -Inf (no density: spec mode refuses DDIM); with eta > 0 only the
// last step has none.
func TestDDIMNoise(t *testing.T) {
	s, err := NewSchedule("cosine", 1000, 10)
	if err != nil {
		t.Fatal(err)
	}
	x, eps, v := []float64{0.4}, []float32{0.1}, []float32{0}
	mean, logVar := make([]float64, 1), make([]float64, 1)
	s.Posterior(5, x, eps, v, StepOptions{Sampler: SamplerDDIM}, mean, logVar)
	a, b := make([]float64, 1), make([]float64, 1)
	s.Step(5, mean, logVar, []float64{1}, a, StepOptions{})
	s.Step(5, mean, logVar, []float64{-1}, b, StepOptions{})
	if a[0] != b[0] || !math.IsInf(logVar[0], -1) {
		t.Fatalf("eta 0: %v vs %v, log-variance %v", a, b, logVar)
	}
	s.Posterior(5, x, eps, v, StepOptions{Sampler: SamplerDDIM, Eta: 0.5}, mean, logVar)
	if math.IsInf(logVar[0], 0) || math.IsNaN(logVar[0]) {
		t.Fatalf("eta 0.5 mid-way: log-variance %v", logVar[0])
	}
	s.Posterior(0, x, eps, v, StepOptions{Sampler: SamplerDDIM, Eta: 1}, mean, logVar)
	if !math.IsInf(logVar[0], -1) {
		t.Fatalf("the last DDIM step has log-variance %v, want -Inf", logVar[0])
	}
}
