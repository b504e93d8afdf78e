package diffusion

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestCosineScheduleValues(t *testing.T) {
	s, err := NewSchedule("cosine", 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// independent evaluation of beta_0 = 1 - f(1/T)/f(0), f(t) = cos((t+0.008)/1.008*pi/2)^2
	f := func(x float64) float64 { c := math.Cos((x + 0.008) / 1.008 * math.Pi / 2); return c * c }
	if want := 1 - f(0.001)/f(0); math.Abs(s.Beta(0)-want) > 1e-15 {
		t.Fatalf("beta_0 = %g, want %g", s.Beta(0), want)
	}
	if ab := s.AlphaBar(999); ab <= 0 || ab > 1e-8 {
		t.Fatalf("alpha-bar at t=999 = %g, want in (0, 1e-8]", ab)
	}
	for k := 1; k < 1000; k++ {
		if s.AlphaBar(k) >= s.AlphaBar(k-1) {
			t.Fatalf("alpha-bar not decreasing at %d", k)
		}
	}
}

func TestRespacing(t *testing.T) {
	full, _ := NewSchedule("cosine", 1000, 1000)
	for _, n := range []int{1, 2, 50, 100, 999} {
		s, err := NewSchedule("cosine", 1000, n)
		if err != nil {
			t.Fatal(err)
		}
		if s.Steps() != n {
			t.Fatalf("n=%d: %d steps", n, s.Steps())
		}
		if s.TrainingTimestep(0) != 0 || (n > 1 && s.TrainingTimestep(n-1) != 999) {
			t.Fatalf("n=%d: first/last kept timestep %d/%d", n, s.TrainingTimestep(0), s.TrainingTimestep(n-1))
		}
		for k := 0; k < n; k++ {
			if k > 0 && s.TrainingTimestep(k) <= s.TrainingTimestep(k-1) {
				t.Fatalf("n=%d: timesteps not increasing at %d", n, k)
			}
			// respacing keeps the cumulative signal of the kept timesteps
			if a, b := s.AlphaBar(k), full.AlphaBar(s.TrainingTimestep(k)); math.Abs(a-b) > 1e-12*math.Max(1, b) {
				t.Fatalf("n=%d k=%d: alpha-bar %g != %g", n, k, a, b)
			}
		}
	}
	s, _ := NewSchedule("cosine", 1000, 100)
	if s.TrainingTimestep(1) != 10 || s.TrainingTimestep(50) != 505 { // 50*999/99 = 504.55 rounds to 505
		t.Fatalf("respaced timesteps %d, %d", s.TrainingTimestep(1), s.TrainingTimestep(50))
	}
	if _, err := NewSchedule("quadratic", 1000, 10); err == nil {
		t.Fatal("unknown schedule accepted")
	}
	if _, err := NewSchedule("cosine", 1000, 1001); err == nil {
		t.Fatal("more sampling than training steps accepted")
	}
}

func TestPosteriorAndVarianceRange(t *testing.T) {
	s, _ := NewSchedule("cosine", 1000, 50)
	k := 20
	ab := s.AlphaBar(k)
	x0 := 0.4
	eps := float32(0.7)
	xt := []float64{math.Sqrt(ab)*x0 + math.Sqrt(1-ab)*float64(eps)}
	mean, lv := make([]float64, 1), make([]float64, 1)
	s.Posterior(k, xt, []float32{eps}, []float32{-1}, StepOptions{}, mean, lv)
	abPrev := s.AlphaBar(k - 1)
	beta := s.Beta(k)
	wantMean := beta*math.Sqrt(abPrev)/(1-ab)*x0 + (1-abPrev)*math.Sqrt(1-beta)/(1-ab)*xt[0]
	if math.Abs(mean[0]-wantMean) > 1e-6 {
		t.Fatalf("posterior mean %g, want %g", mean[0], wantMean)
	}
	if want := math.Log(beta * (1 - abPrev) / (1 - ab)); math.Abs(lv[0]-want) > 1e-12 {
		t.Fatalf("v=-1 log variance %g, want posterior %g", lv[0], want)
	}
	s.Posterior(k, xt, []float32{eps}, []float32{1}, StepOptions{}, mean, lv)
	if math.Abs(lv[0]-math.Log(beta)) > 1e-12 {
		t.Fatalf("v=+1 log variance %g, want log beta %g", lv[0], math.Log(beta))
	}
	s.Posterior(k, xt, []float32{eps}, []float32{1}, StepOptions{Temperature: 0.5}, mean, lv)
	if math.Abs(lv[0]-math.Log(beta)-2*math.Log(0.5)) > 1e-12 {
		t.Fatalf("temperature 0.5 should add 2 log 0.5 to the log variance")
	}
	// clipping: a huge epsilon would put x0 far outside [-1, 1]
	s.Posterior(k, xt, []float32{-50}, []float32{0}, StepOptions{ClipX0: true}, mean, lv)
	if want := beta*math.Sqrt(abPrev)/(1-ab)*1 + (1-abPrev)*math.Sqrt(1-beta)/(1-ab)*xt[0]; math.Abs(mean[0]-want) > 1e-9 {
		t.Fatalf("clipped mean %g, want %g", mean[0], want)
	}
}

func TestFinalStepAddsNoNoise(t *testing.T) {
	s, _ := NewSchedule("cosine", 1000, 10)
	mean, lv, out := []float64{0.25}, []float64{-3}, []float64{0}
	s.Step(0, mean, lv, []float64{2}, out, StepOptions{})
	if out[0] != 0.25 {
		t.Fatalf("step 0 added noise: %g", out[0])
	}
	s.Step(0, mean, lv, []float64{2}, out, StepOptions{FinalStepNoise: true})
	if want := 0.25 + math.Exp(-1.5)*2; math.Abs(out[0]-want) > 1e-15 {
		t.Fatalf("final step with noise %g, want %g", out[0], want)
	}
}

func TestGaussianLogDensity(t *testing.T) {
	// integrates to 1 in 1-D (trapezoid over +-12 sd) and sums over dimensions
	mean, lv := []float64{0.3}, []float64{math.Log(0.04)}
	sum, h := 0.0, 0.001
	for x := -2.7; x <= 3.3; x += h {
		sum += math.Exp(GaussianLogDensity([]float64{x}, mean, lv)) * h
	}
	if math.Abs(sum-1) > 1e-6 {
		t.Fatalf("density integrates to %g", sum)
	}
	a := GaussianLogDensity([]float64{0.1}, []float64{0}, []float64{0})
	b := GaussianLogDensity([]float64{-0.5}, []float64{1}, []float64{1})
	if ab := GaussianLogDensity([]float64{0.1, -0.5}, []float64{0, 1}, []float64{0, 1}); math.Abs(ab-a-b) > 1e-12 {
		t.Fatalf("2-D density %g != %g + %g", ab, a, b)
	}
}

// For Gaussian data the exact reverse step is Gaussian with a variance between the posterior
// variance and beta, so a head that predicts the exact epsilon and the exact variance (through
// v) must reproduce the data distribution. Sample size 20000, 100 steps; tolerances 0.02 on the
// mean (~6 standard errors) and 0.015 on the standard deviation (~6 standard errors).
func TestExactGaussianReverseProcess(t *testing.T) {
	const m, sd, n = 0.3, 0.5, 20000
	s, _ := NewSchedule("cosine", 1000, 100)
	rng := rand.New(rand.NewPCG(7, 11))
	opt := StepOptions{}
	x, mean, lv := make([]float64, 1), make([]float64, 1), make([]float64, 1)
	var sum, sum2 float64
	for i := 0; i < n; i++ {
		x[0] = rng.NormFloat64()
		for k := s.Steps() - 1; k >= 0; k-- {
			ab := s.AlphaBar(k)
			post := 1 / (ab*sd*sd + 1 - ab) // precision-like factor of x0 | x_t
			eps := math.Sqrt(1-ab) * (x[0] - math.Sqrt(ab)*m) * post
			v := float32(-1)
			if k > 0 {
				varX0 := sd * sd * (1 - ab) * post
				c1 := s.coef1[k]
				exact := math.Exp(s.postLogVarClipped[k]) + c1*c1*varX0
				frac := (math.Log(exact) - s.postLogVarClipped[k]) / (s.logBetas[k] - s.postLogVarClipped[k])
				v = float32(2*frac - 1)
			}
			s.Posterior(k, x, []float32{float32(eps)}, []float32{v}, opt, mean, lv)
			s.Step(k, mean, lv, []float64{rng.NormFloat64()}, x, opt)
		}
		sum += x[0]
		sum2 += x[0] * x[0]
	}
	mu := sum / n
	std := math.Sqrt(sum2/n - mu*mu)
	if math.Abs(mu-m) > 0.02 || math.Abs(std-sd) > 0.015 {
		t.Fatalf("samples have mean %.4f sd %.4f, want %.2f and %.2f", mu, std, m, sd)
	}
}
