package diffusion

import (
	"math"
	"testing"
)

// Gaussian data N(mu, s^2) per dimension has an exact eps predictor, so a sampler's law can be
// checked against the known answer: x_t = sqrt(abar) x0 + sqrt(1-abar) eps gives
// E[eps | x_t] = sqrt(1-abar) (x_t - sqrt(abar) mu) / (abar s^2 + 1 - abar).
const lawMu, lawS = 0.2, 0.3

func gaussEps(s *Schedule, k int, xt []float64, eps []float32) {
	ab := s.AlphaBar(k)
	for i, x := range xt {
		eps[i] = float32(math.Sqrt(1-ab) * (x - math.Sqrt(ab)*lawMu) / (ab*lawS*lawS + 1 - ab))
	}
}

// runLaw samples n tokens of dimension dim (n*dim scalar draws) and returns them flattened.
func runLaw(t *testing.T, sampler Sampler, eta float64, steps, n, dim int, seed uint64) []float64 {
	t.Helper()
	s, err := NewSchedule("cosine", 1000, steps)
	if err != nil {
		t.Fatal(err)
	}
	var all []float64
	eps, v := make([]float32, dim), make([]float32, dim)
	for i := range v {
		v[i] = -1 // the posterior variance: exact for ddpm as steps grow
	}
	mean, logVar := make([]float64, dim), make([]float64, dim)
	var st SamplerState
	for tok := 0; tok < n; tok++ {
		noise := NewTokenNoise(seed, 0, tok, steps, dim)
		x := append([]float64(nil), noise.XT...)
		st.Reset()
		for i := 0; i < steps; i++ {
			k := steps - 1 - i
			gaussEps(s, k, x, eps)
			s.SampleStep(sampler, eta, k, x, eps, v, noise.Eps[i], StepOptions{}, &st, mean, logVar, x)
		}
		all = append(all, x...)
	}
	return all
}

func moments(x []float64) (mean, variance float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		variance += (v - mean) * (v - mean)
	}
	return mean, variance / float64(len(x)-1)
}

// With 250 steps every sampler must reproduce N(0.2, 0.09). Sample size 20,000 scalars
// (2,000 tokens x 10 dims, independent): the standard error of the mean is 0.0021 and of the
// variance 0.0009, so the tolerances (0.012 on the mean, 0.006 on the variance) are about
// 5-6 standard errors plus a small discretisation allowance.
func TestSamplerLawManySteps(t *testing.T) {
	cases := []struct {
		s   Sampler
		eta float64
	}{{DDPM, 0}, {DDIM, 0}, {DDIM, 0.5}, {DDIM, 1}, {DPMPP2M, 0}, {DPMPP2MSDE, 0}}
	for _, c := range cases {
		x := runLaw(t, c.s, c.eta, 250, 2000, 10, 7)
		m, v := moments(x)
		t.Logf("%s eta=%g: mean %.4f (want %.2f) var %.4f (want %.4f)", c.s, c.eta, m, lawMu, v, lawS*lawS)
		if math.Abs(m-lawMu) > 0.012 || math.Abs(v-lawS*lawS) > 0.006 {
			t.Errorf("%s eta=%g: mean %.4f var %.4f, want %.2f and %.4f within 0.012 and 0.006", c.s, c.eta, m, v, lawMu, lawS*lawS)
		}
	}
}

// DDIM with eta = 1 is DDPM with the posterior variance (v = -1) written differently: same
// mean, same sigma_k^2, same noise, so the two agree sample by sample, not only in law (up to
// rounding: ddim re-derives eps from x0, about 1e-9 after 50 steps).
func TestDDIMEta1IsDDPM(t *testing.T) {
	for _, steps := range []int{5, 50} {
		a := runLaw(t, DDPM, 0, steps, 200, 4, 3)
		b := runLaw(t, DDIM, 1, steps, 200, 4, 3)
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-7 {
				t.Fatalf("steps %d: sample %d: ddpm %.12f ddim(eta=1) %.12f", steps, i, a[i], b[i])
			}
		}
	}
}

// Few steps: measured, not asserted (no sampler is exact at 5 or 10 steps); the log is the
// record. Only finiteness is required.
func TestSamplerFewStepsMeasured(t *testing.T) {
	for _, steps := range []int{5, 10, 25} {
		for _, c := range []struct {
			s   Sampler
			eta float64
		}{{DDPM, 0}, {DDIM, 0}, {DDIM, 1}, {DPMPP2M, 0}, {DPMPP2MSDE, 0}} {
			m, v := moments(runLaw(t, c.s, c.eta, steps, 1000, 10, 11))
			t.Logf("steps %2d %-12s eta=%g: mean %.4f var %.4f (data 0.2000, 0.0900)", steps, c.s, c.eta, m, v)
			if math.IsNaN(m) || math.IsNaN(v) || math.IsInf(m, 0) || math.IsInf(v, 0) {
				t.Errorf("steps %d %s: mean %v var %v", steps, c.s, m, v)
			}
		}
	}
}

// Same seed, same bytes; another seed, other bytes.
func TestSamplerDeterministic(t *testing.T) {
	for _, s := range Samplers {
		if s == Distilled { // not a head step: mar's distilled-head tests cover it
			continue
		}
		a := runLaw(t, s, 0.5, 10, 20, 4, 5)
		b := runLaw(t, s, 0.5, 10, 20, 4, 5)
		c := runLaw(t, s, 0.5, 10, 20, 4, 6)
		same := true
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				t.Fatalf("%s: sample %d differs between identical runs", s, i)
			}
			same = same && a[i] == c[i]
		}
		if same {
			t.Errorf("%s: seeds 5 and 6 gave the same samples", s)
		}
	}
}

// SampleStep with ddpm must be exactly Posterior then Step: the default stays bit-identical.
func TestSampleStepDDPMBitIdentical(t *testing.T) {
	s, _ := NewSchedule("cosine", 1000, 20)
	noise := NewTokenNoise(1, 2, 3, 20, 8)
	eps, v := make([]float32, 8), make([]float32, 8)
	x1 := append([]float64(nil), noise.XT...)
	x2 := append([]float64(nil), noise.XT...)
	m, lv := make([]float64, 8), make([]float64, 8)
	opt := StepOptions{ClipX0: true, Temperature: 0.9}
	var st SamplerState
	for i := 0; i < 20; i++ {
		k := 19 - i
		for j := range eps {
			eps[j] = float32(math.Sin(float64(i*8+j)) * 0.7)
			v[j] = float32(math.Cos(float64(i+j))) * 0.5
		}
		s.Posterior(k, x1, eps, v, opt, m, lv)
		s.Step(k, m, lv, noise.Eps[i], x1, opt)
		s.SampleStep(DDPM, 0, k, x2, eps, v, noise.Eps[i], opt, &st, m, lv, x2)
		for j := range x1 {
			if math.Float64bits(x1[j]) != math.Float64bits(x2[j]) {
				t.Fatalf("step %d dim %d: %v != %v", i, j, x1[j], x2[j])
			}
		}
	}
}

func TestParseSamplerAndQualification(t *testing.T) {
	if s, err := ParseSampler(""); err != nil || s != DDPM {
		t.Errorf(`ParseSampler("") = %q, %v; want ddpm`, s, err)
	}
	if _, err := ParseSampler("euler"); err == nil || !contains(err.Error(), "dpmpp-2m-sde") {
		t.Errorf("unknown sampler error %v should name the allowed ones", err)
	}
	want := map[Sampler]bool{DDPM: true, DDIM: true, DPMPP2M: false, DPMPP2MSDE: false}
	for s, ok := range want {
		if s.GaussianSteps(0.5) != ok {
			t.Errorf("%s GaussianSteps(0.5) = %v, want %v", s, !ok, ok)
		}
	}
	if DDIM.GaussianSteps(0) {
		t.Error("ddim eta=0 is a point mass, must not qualify")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
