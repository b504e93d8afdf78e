package diffusion

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func relClose(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(math.Abs(b), 1e-300) }

func mustSchedule(t *testing.T, kind string, T, n int) *Schedule {
	t.Helper()
	s, err := NewSchedule(kind, T, n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCosineScheduleValues(t *testing.T) {
	s := mustSchedule(t, "cosine", 1000, 1000)
	// Independent evaluation of beta_0 = 1 - f(1/T)/f(0), f(t) = cos((t+0.008)/1.008*pi/2)^2.
	f := func(x float64) float64 { return math.Pow(math.Cos((x+0.008)/1.008*math.Pi/2), 2) }
	if want := 1 - f(0.001)/f(0); !relClose(s.Beta(0), want, 1e-12) {
		t.Fatalf("beta_0 = %g, want %g", s.Beta(0), want)
	}
	// Golden values from Python's math module (the reference); Go's and glibc's cos may differ
	// in the last bit, far below the 1e-4 parity the sampler needs.
	for _, g := range []struct {
		got, want float64
		what      string
	}{
		{s.Beta(0), 4.128422482196914e-05, "beta_0"},
		{s.Beta(500), 0.003155691441585007, "beta_500"},
		{s.AlphaBar(998), 2.4287669070348544e-06, "alpha-bar_998"},
		{s.AlphaBar(999), 2.4287669070348567e-09, "alpha-bar_999"},
	} {
		if !relClose(g.got, g.want, 1e-11) {
			t.Errorf("%s = %.17g, reference %.17g", g.what, g.got, g.want)
		}
	}
	if s.Beta(999) != 0.999 {
		t.Errorf("last beta %g, want the 0.999 clip", s.Beta(999))
	}
	if ab := s.AlphaBar(999); ab <= 0 || ab >= 1e-8 {
		t.Fatalf("alpha-bar at t=999 = %g, want in (0, 1e-8)", ab)
	}
	for k := 1; k < 1000; k++ {
		if s.AlphaBar(k) >= s.AlphaBar(k-1) {
			t.Fatalf("alpha-bar not decreasing at %d", k)
		}
	}
}

func TestLinearSchedule(t *testing.T) {
	for _, T := range []int{1000, 500} {
		betas, err := trainingBetas("linear", T)
		if err != nil {
			t.Fatal(err)
		}
		scale := 1000 / float64(T)
		lo, hi := scale*1e-4, scale*0.02
		if betas[0] != lo || betas[T-1] != hi {
			t.Fatalf("T=%d: end betas %g, %g, want %g, %g", T, betas[0], betas[T-1], lo, hi)
		}
		for i := 1; i < T; i++ {
			if want := lo + (hi-lo)*float64(i)/float64(T-1); !relClose(betas[i], want, 1e-13) {
				t.Fatalf("T=%d: beta_%d = %g, want %g", T, i, betas[i], want)
			}
		}
		// The sampling schedule's betas are recomputed from alpha-bar (as SpacedDiffusion does).
		if s := mustSchedule(t, "linear", T, T); !relClose(s.Beta(T/2), betas[T/2], 1e-9) {
			t.Fatalf("T=%d: respaced beta %g, training beta %g", T, s.Beta(T/2), betas[T/2])
		}
	}
}

func TestScheduleErrors(t *testing.T) {
	for _, c := range []struct {
		kind   string
		T, n   int
		inText string
	}{
		{"quadratic", 1000, 10, "cosine, linear"},
		{"cosine", 1000, 1001, "1 to 1000"},
		{"cosine", 1000, 0, "1 to 1000"},
	} {
		if _, err := NewSchedule(c.kind, c.T, c.n); err == nil || !strings.Contains(err.Error(), c.inText) {
			t.Errorf("NewSchedule(%q, %d, %d): error %v, want one naming %q", c.kind, c.T, c.n, err, c.inText)
		}
	}
}

func TestRespacing(t *testing.T) {
	full := mustSchedule(t, "cosine", 1000, 1000)
	for _, n := range []int{1, 2, 50, 100, 999} {
		s := mustSchedule(t, "cosine", 1000, n)
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
			// Respacing keeps the cumulative signal of the kept timesteps, up to the absolute
			// rounding of 1 - beta (the reference recomputes alpha-bar from betas too).
			if a, b := s.AlphaBar(k), full.AlphaBar(s.TrainingTimestep(k)); math.Abs(a-b) > 1e-15+1e-12*b {
				t.Fatalf("n=%d k=%d: alpha-bar %g != %g", n, k, a, b)
			}
			if math.IsInf(s.PosteriorLogVariance(k), 0) || math.IsNaN(s.PosteriorLogVariance(k)) {
				t.Fatalf("n=%d k=%d: posterior log-variance %g", n, k, s.PosteriorLogVariance(k))
			}
		}
	}
	// Kept timesteps from Python's space_timesteps (round half to even: 2.5 -> 2).
	for _, c := range []struct {
		T, n int
		want []int
	}{
		{6, 3, []int{0, 2, 5}},
		{1000, 100, []int{0, 10, 20, 30, 40}},
		{1000, 50, []int{0, 20, 41, 61, 82}},
	} {
		if got := respace(c.T, c.n); !slices.Equal(got[:len(c.want)], c.want) {
			t.Errorf("respace(%d, %d) starts %v, want %v", c.T, c.n, got[:len(c.want)], c.want)
		}
	}
	if s := mustSchedule(t, "cosine", 1000, 100); s.TrainingTimestep(50) != 505 { // 50*999/99 = 504.55
		t.Errorf("respaced timestep 50 = %d, want 505", s.TrainingTimestep(50))
	}
	// N == T is the identity: the training betas come back (up to the rounding of
	// 1 - alpha-bar_i/alpha-bar_{i-1}, which the reference does too).
	base, _ := trainingBetas("cosine", 1000)
	for i, b := range base {
		if full.TrainingTimestep(i) != i || !relClose(full.Beta(i), b, 1e-10) {
			t.Fatalf("N==T step %d: timestep %d beta %g, want %d and %g", i, full.TrainingTimestep(i), full.Beta(i), i, b)
		}
	}
}

func TestPosteriorAndVarianceRange(t *testing.T) {
	s := mustSchedule(t, "cosine", 1000, 50)
	k := 20
	ab, abPrev, beta := s.AlphaBar(k), s.AlphaBar(k-1), s.Beta(k)
	// x_t built from a known x0 and eps: the head's exact eps must give back x0, so the mean
	// is the closed-form posterior mean of q(x_{k-1} | x_k, x0).
	x0, eps := 0.4, float32(0.7)
	xt := []float64{math.Sqrt(ab)*x0 + math.Sqrt(1-ab)*float64(eps)}
	mean, lv := make([]float64, 1), make([]float64, 1)
	postMean := func(x0 float64) float64 {
		return beta*math.Sqrt(abPrev)/(1-ab)*x0 + (1-abPrev)*math.Sqrt(1-beta)/(1-ab)*xt[0]
	}
	s.Posterior(k, xt, []float32{eps}, []float32{-1}, StepOptions{}, mean, lv)
	if math.Abs(mean[0]-postMean(x0)) > 1e-12 {
		t.Fatalf("posterior mean %g, want %g", mean[0], postMean(x0))
	}
	if want := math.Log(beta * (1 - abPrev) / (1 - ab)); math.Abs(lv[0]-want) > 1e-12 {
		t.Fatalf("v=-1 log variance %g, want posterior %g", lv[0], want)
	}
	s.Posterior(k, xt, []float32{eps}, []float32{1}, StepOptions{}, mean, lv)
	if math.Abs(lv[0]-math.Log(beta)) > 1e-12 {
		t.Fatalf("v=+1 log variance %g, want log beta %g", lv[0], math.Log(beta))
	}
	s.Posterior(k, xt, []float32{eps}, []float32{0}, StepOptions{}, mean, lv)
	if want := (math.Log(beta) + s.PosteriorLogVariance(k)) / 2; math.Abs(lv[0]-want) > 1e-12 {
		t.Fatalf("v=0 log variance %g, want midpoint %g", lv[0], want)
	}
	noTemp := lv[0]
	s.Posterior(k, xt, []float32{eps}, []float32{0}, StepOptions{Temperature: 0.5}, mean, lv)
	if math.Abs(lv[0]-noTemp-2*math.Log(0.5)) > 1e-12 {
		t.Fatalf("temperature 0.5 moved the log variance by %g, want 2 log 0.5", lv[0]-noTemp)
	}
	// clipping: a large negative epsilon puts x0 far above 1
	s.Posterior(k, xt, []float32{-50}, []float32{0}, StepOptions{ClipX0: true}, mean, lv)
	if math.Abs(mean[0]-postMean(1)) > 1e-12 {
		t.Fatalf("clipped mean %g, want %g", mean[0], postMean(1))
	}
	// at k = 0 the clipped posterior log-variance is that of k = 1
	if s.PosteriorLogVariance(0) != s.PosteriorLogVariance(1) {
		t.Fatal("k = 0 posterior log-variance not clipped to k = 1")
	}
}

func TestFinalStepAddsNoNoise(t *testing.T) {
	s := mustSchedule(t, "cosine", 1000, 10)
	mean, lv, out := []float64{0.25}, []float64{-3}, []float64{0}
	s.Step(0, mean, lv, []float64{2}, out, StepOptions{})
	if out[0] != 0.25 {
		t.Fatalf("step 0 added noise: %g", out[0])
	}
	s.Step(0, mean, lv, []float64{2}, out, StepOptions{FinalStepNoise: true})
	if want := 0.25 + math.Exp(-1.5)*2; math.Abs(out[0]-want) > 1e-15 {
		t.Fatalf("final step with noise %g, want %g", out[0], want)
	}
	s.Step(3, mean, lv, []float64{2}, out, StepOptions{})
	if want := 0.25 + math.Exp(-1.5)*2; math.Abs(out[0]-want) > 1e-15 {
		t.Fatalf("step 3 gave %g, want %g", out[0], want)
	}
}

func TestGaussianLogDensity(t *testing.T) {
	// equals the 1-D formula summed over dimensions
	x, mean, lv := []float64{0.1, -0.5, 2}, []float64{0, 1, 1.5}, []float64{0, 1, -2}
	want := 0.0
	for i := range x {
		v := math.Exp(lv[i])
		want += math.Log(1/math.Sqrt(2*math.Pi*v)) - (x[i]-mean[i])*(x[i]-mean[i])/(2*v)
	}
	if got := GaussianLogDensity(x, mean, lv); math.Abs(got-want) > 1e-12 {
		t.Fatalf("log density %g, want %g", got, want)
	}
	// integrates to 1 in 1-D (Riemann sum over +-15 sd)
	m, l := []float64{0.3}, []float64{math.Log(0.04)}
	sum, h := 0.0, 0.001
	for i := -3000; i <= 3000; i++ {
		sum += math.Exp(GaussianLogDensity([]float64{0.3 + float64(i)*h}, m, l)) * h
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("density integrates to %.12f", sum)
	}
}

func TestGuidanceAndCFGSchedules(t *testing.T) {
	out := make([]float32, 2)
	GuidedEpsilon([]float32{1, -2}, []float32{0.5, 0}, 3, out)
	if out[0] != 2 || out[1] != -6 {
		t.Fatalf("guided epsilon %v, want [2 -6]", out)
	}
	if got := LinearCFGScale(4, 49, 49); got != 4 {
		t.Fatalf("linear CFG at the last step %g, want 4", got)
	}
	if got := LinearCFGScale(4, 7, 49); math.Abs(got-(1+3.0*7/49)) > 1e-15 {
		t.Fatalf("linear CFG %g", got)
	}
}

// exactEps is E[eps | x_t] for data x0 ~ N(m, sd^2): x_t = sqrt(ab) x0 + sqrt(1-ab) eps is
// jointly Gaussian with eps, Cov(eps, x_t) = sqrt(1-ab), Var(x_t) = ab sd^2 + 1 - ab, so
// E[eps | x_t] = sqrt(1-ab) (x_t - sqrt(ab) m) / (ab sd^2 + 1 - ab).
func exactEps(xt, ab, m, sd float64) float64 {
	return math.Sqrt(1-ab) * (xt - math.Sqrt(ab)*m) / (ab*sd*sd + 1 - ab)
}

// The conditional mean is the least-squares predictor: its residual has zero mean and is
// uncorrelated with x_t. 200000 draws; the tolerance 0.01 is ~4 standard errors.
func TestExactEpsilonPredictor(t *testing.T) {
	const m, sd, n = 0.3, 0.5, 200000
	rng := rand.New(rand.NewPCG(3, 5))
	for _, ab := range []float64{0.9, 0.5, 0.05} {
		var sr, srx float64
		for i := 0; i < n; i++ {
			eps := rng.NormFloat64()
			xt := math.Sqrt(ab)*(m+sd*rng.NormFloat64()) + math.Sqrt(1-ab)*eps
			r := eps - exactEps(xt, ab, m, sd)
			sr += r
			srx += r * xt
		}
		if math.Abs(sr/n) > 0.01 || math.Abs(srx/n) > 0.01 {
			t.Fatalf("alpha-bar %g: residual mean %g, residual-x_t moment %g", ab, sr/n, srx/n)
		}
	}
}

// reverseMoments runs the sampler on Gaussian data with the exact epsilon. With chosenV it
// picks v per step; it returns the sample mean and std of the outputs and the mean and std
// the same linear-Gaussian recursion gives in closed form.
func reverseMoments(s *Schedule, m, sd float64, n int, seed uint64, chosenV func(k int) float32) (mu, std, wantMu, wantStd float64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	x, mean, lv := make([]float64, 1), make([]float64, 1), make([]float64, 1)
	var sum, sum2 float64
	for i := 0; i < n; i++ {
		x[0] = rng.NormFloat64()
		for k := s.Steps() - 1; k >= 0; k-- {
			eps := float32(exactEps(x[0], s.AlphaBar(k), m, sd))
			s.Posterior(k, x, []float32{eps}, []float32{chosenV(k)}, StepOptions{}, mean, lv)
			s.Step(k, mean, lv, []float64{rng.NormFloat64()}, x, StepOptions{})
		}
		sum += x[0]
		sum2 += x[0] * x[0]
	}
	mu = sum / float64(n)
	std = math.Sqrt(sum2/float64(n) - mu*mu)
	// Closed form: each step maps x -> A x + B + noise, from x_T ~ N(0, 1).
	wantMu, varX := 0.0, 1.0
	one, zero := []float64{1}, []float64{0}
	for k := s.Steps() - 1; k >= 0; k-- {
		v := []float32{chosenV(k)}
		s.Posterior(k, zero, []float32{float32(exactEps(0, s.AlphaBar(k), m, sd))}, v, StepOptions{}, mean, lv)
		b := mean[0]
		s.Posterior(k, one, []float32{float32(exactEps(1, s.AlphaBar(k), m, sd))}, v, StepOptions{}, mean, lv)
		a := mean[0] - b
		wantMu, varX = a*wantMu+b, a*a*varX
		if k > 0 {
			varX += math.Exp(lv[0])
		}
	}
	return mu, std, wantMu, math.Sqrt(varX)
}

// Sampler recovers Gaussian data N(0.3, 0.5^2) from the exact epsilon predictor with the
// posterior variance (v = -1), no clipping: 20000 trajectories of 100 steps, fixed seed.
// Tolerance 0.03 on mean and std. The posterior variance omits the spread of x0 given x_t,
// so the expected std is ~0.482, not 0.5; the closed-form recursion is checked too, at
// 0.006 (~6 standard errors: se(mean) = 0.0034, se(std) = 0.0024).
func TestGaussianDataPosteriorVariance(t *testing.T) {
	const m, sd, n = 0.3, 0.5, 20000
	s := mustSchedule(t, "cosine", 1000, 100)
	mu, std, wantMu, wantStd := reverseMoments(s, m, sd, n, 7, func(int) float32 { return -1 })
	if math.Abs(mu-m) > 0.03 || math.Abs(std-sd) > 0.03 {
		t.Fatalf("samples: mean %.4f std %.4f, want %.2f and %.2f within 0.03", mu, std, m, sd)
	}
	if math.Abs(mu-wantMu) > 0.006 || math.Abs(std-wantStd) > 0.006 {
		t.Fatalf("samples: mean %.4f std %.4f, closed form %.4f and %.4f", mu, std, wantMu, wantStd)
	}
}

// With v chosen so each step's variance is the exact reverse variance (posterior variance
// plus coef1^2 Var(x0 | x_t)), the sampler must reproduce N(0.3, 0.5^2) itself: 20000
// trajectories, tolerance 0.015 on mean and std (~4.5 and ~6 standard errors).
func TestGaussianDataExactVariance(t *testing.T) {
	const m, sd, n = 0.3, 0.5, 20000
	s := mustSchedule(t, "cosine", 1000, 100)
	exactV := func(k int) float32 {
		if k == 0 {
			return -1
		}
		ab := s.AlphaBar(k)
		varX0 := sd * sd * (1 - ab) / (ab*sd*sd + 1 - ab)
		exact := math.Exp(s.PosteriorLogVariance(k)) + s.coef1[k]*s.coef1[k]*varX0
		frac := (math.Log(exact) - s.PosteriorLogVariance(k)) / (s.LogBeta(k) - s.PosteriorLogVariance(k))
		return float32(2*frac - 1)
	}
	mu, std, wantMu, wantStd := reverseMoments(s, m, sd, n, 9, exactV)
	if math.Abs(wantMu-m) > 1e-3 || math.Abs(wantStd-sd) > 2e-3 {
		t.Fatalf("closed form: mean %.4f std %.4f, want %.2f and %.2f", wantMu, wantStd, m, sd)
	}
	if math.Abs(mu-m) > 0.015 || math.Abs(std-sd) > 0.015 {
		t.Fatalf("samples: mean %.4f std %.4f, want %.2f and %.2f", mu, std, m, sd)
	}
}
