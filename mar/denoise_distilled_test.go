package mar_test

import (
	"math"
	"strings"
	"testing"

	"marspec/diffusion"
	"marspec/mar"
	"marspec/mar/analytic"
)

func distilledModel() (*mar.Model, *analytic.Distilled) {
	m := analytic.WithDistilled(analytic.New(analytic.Params{Name: "d", SeqLen: 2, TokenDim: 2, Base: []float64{0, 0},
		Scale: 0.1, Steps: 10, Classes: 1}), 4)
	return m, m.Distilled.(*analytic.Distilled)
}

// The distilled sampler's machinery on an exact student (the analytic ODE endpoint of
// Gaussian data): for K = 1, 2 and 4 steps, guided and not, 20,000 tokens drawn with their own
// TokenNoise must have the teacher's law, N(mu_u + w (mu_c - mu_u), s^2), within 5 standard
// errors in the mean and 5% in the variance (its standard error is 1%). Re-noising at the wrong
// alphabar, or taking the wrong noise, or mixing guidance wrongly, moves one of them. Each step
// is one student call, guided or not. At temperature tau the noise (x_T and every re-noising)
// is scaled by tau, and the exact student then gives N(mean, tau^2 s^2) at every K: scaling x_T
// alone, or the re-noising alone, gives another variance for K > 1.
func TestDistilledSamplerLaw(t *testing.T) {
	m, head := distilledModel()
	const n, s = 20000, 0.1
	cond := []float32{0.3, -0.2, float32(math.Log(s))}
	uncond := []float32{0.1, 0.0, float32(math.Log(s))}
	for _, tau := range []float64{1, 0.8} {
		for _, k := range []int{1, 2, 4} {
			for _, guided := range []bool{false, true} {
				checkDistilledLaw(t, m, head, k, guided, tau, n, s, cond, uncond)
			}
		}
	}
}

func checkDistilledLaw(t *testing.T, m *mar.Model, head *analytic.Distilled, k int, guided bool, tau float64, n int, s float64, cond, uncond []float32) {
	t.Helper()
	den, err := m.NewDenoiser(mar.Options{Steps: k, Sampler: diffusion.Distilled, Temperature: tau}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.3, -0.2}
	rows := make([]mar.DenoiseRow, n)
	for i := range rows {
		rows[i] = mar.DenoiseRow{Z: cond, CFG: 1, Noise: diffusion.NewTokenNoise(uint64(k), i, 0, k, 2)}
		if guided {
			rows[i].ZUncond, rows[i].CFG = uncond, 2
		}
	}
	if guided {
		want = []float64{0.1 + 2*0.2, 0 + 2*-0.2}
	}
	x0 := mar.Rows(n, 2)
	head.Calls = 0
	if err := den.Run(rows, x0, nil); err != nil {
		t.Fatal(err)
	}
	if head.Calls != k {
		t.Errorf("K=%d guided=%v: %d student calls, want %d", k, guided, head.Calls, k)
	}
	for j := 0; j < 2; j++ {
		var sum, sq float64
		for _, x := range x0 {
			sum += x[j]
		}
		mean := sum / float64(n)
		for _, x := range x0 {
			sq += (x[j] - mean) * (x[j] - mean)
		}
		v := sq / float64(n-1)
		sd := tau * s
		if se := sd / math.Sqrt(float64(n)); math.Abs(mean-want[j]) > 5*se {
			t.Errorf("K=%d guided=%v tau=%g dim %d: mean %.5f, want %.5f +- %.5f", k, guided, tau, j, mean, want[j], 5*se)
		}
		if math.Abs(v/(sd*sd)-1) > 0.05 {
			t.Errorf("K=%d guided=%v tau=%g dim %d: variance %.6f, want %.6f within 5%%", k, guided, tau, j, v, sd*sd)
		}
	}
}

// K > 1 re-noises with the token's own Eps[i]: a token is a function of its TokenNoise alone
// (same noise, same token; a different Eps[1] changes a 2-step token but not a 1-step one).
func TestDistilledUsesCallerNoise(t *testing.T) {
	m, _ := distilledModel()
	z := []float32{0.3, -0.2, float32(math.Log(0.1))}
	run := func(k int, noise *diffusion.TokenNoise) []float64 {
		den, err := m.NewDenoiser(mar.Options{Steps: k, Sampler: diffusion.Distilled}, false)
		if err != nil {
			t.Fatal(err)
		}
		x0 := mar.Rows(1, 2)
		if err := den.Run([]mar.DenoiseRow{{Z: z, CFG: 1, Noise: noise}}, x0, nil); err != nil {
			t.Fatal(err)
		}
		return x0[0]
	}
	for _, k := range []int{1, 2} {
		a := run(k, diffusion.NewTokenNoise(3, 1, 0, k, 2))
		b := run(k, diffusion.NewTokenNoise(3, 1, 0, k, 2))
		other := diffusion.NewTokenNoise(3, 1, 0, k, 2)
		other.Eps[k-1] = []float64{2, -2}
		c := run(k, other)
		if a[0] != b[0] || a[1] != b[1] {
			t.Errorf("K=%d: same noise gave %v and %v", k, a, b)
		}
		if changed := a[0] != c[0] || a[1] != c[1]; changed != (k > 1) {
			t.Errorf("K=%d: changing Eps[%d] changed the token: %v, want %v", k, k-1, changed, k > 1)
		}
	}
}

// Model.Validate refuses what the distilled head cannot honour, and a pack without one.
func TestDistilledValidate(t *testing.T) {
	m, _ := distilledModel()
	for _, c := range []struct {
		opt  mar.Options
		want string
	}{
		{mar.Options{Sampler: diffusion.Distilled, Steps: 3}, "steps 3"},
		{mar.Options{Sampler: diffusion.Distilled, Steps: 4, CFG: 4.5}, "cfg 4.5"},
		{mar.Options{Sampler: diffusion.Distilled, Steps: 4, StepsLate: 2}, "steps_late 2"},
	} {
		err := m.Validate(&c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error naming %q", c.opt, err, c.want)
		}
	}
	ok := mar.Options{Sampler: diffusion.Distilled, Steps: 2, CFG: 4, Temperature: 0.9}
	if err := m.Validate(&ok); err != nil {
		t.Errorf("steps 2, cfg 4, temperature 0.9: %v", err)
	}
	plain := stepperModel()
	if err := plain.Validate(&mar.Options{Sampler: diffusion.Distilled, Steps: 1}); err == nil || !strings.Contains(err.Error(), "no distilled_head") {
		t.Errorf("pack without a distilled head: got %v", err)
	}
}
