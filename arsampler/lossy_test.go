package arsampler

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"marspec/align"
	"marspec/mar/analytic"
)

// With Rejection=Target a rejected draft becomes the target's own draw, made with the token's
// shared noise from the same context the target-only sampler would use. A draft that is never
// accepted (5 sd away) must therefore give the target-only images bit for bit, with no
// resampler call: this pins down which draw the practical variant takes. (Group verification's
// target draws come from the verified context alone, MAR's parallel decoding, so it has no such
// reference.)
func TestRejectionTargetTakesTheTargetsDraw(t *testing.T) {
	target := analytic.New(targetParams())
	far := draftParams()
	for i := range far.Base {
		far.Base[i] += 5
	}
	cfg := specConfig(21, Prefix, align.Exact)
	cfg.Rejection = Target
	for _, v := range []Schedule{Batched, Lazy} {
		cfg.Schedule = v
		res, _ := runSpec(t, target, analytic.New(far), cfg, 30, 7)
		ref := runTarget(t, target, 21, 30)
		for i, r := range res {
			if r.Stats.Accepted != 0 || r.Stats.Resampled != 0 || r.Stats.Tries != 0 || r.Stats.Fallbacks == 0 {
				t.Fatalf("%v: unexpected statistics %+v", v, r.Stats)
			}
			for k := range r.Tokens {
				if r.Tokens[k] != ref[i][k] {
					t.Fatalf("%v: image %d token value %d: %v, target-only %v", v, i, k, r.Tokens[k], ref[i][k])
				}
			}
		}
	}
}

// Every judged draft is accepted with probability a = min(1, e^lambda r), and the run records
// the sum of those a: the number accepted must agree with it within 4.5 standard deviations
// (sqrt of the sum of a(1-a)), for tolerances 0, 0.5 and 3. The tolerance must raise alpha and
// its recorded gain must be 0 when off and positive when on.
func TestToleranceAcceptsAtTheStatedRate(t *testing.T) {
	target, draft := analytic.New(targetParams()), analytic.New(draftParams())
	prev := -1.0
	for _, lambda := range []float64{0, 0.5, 3} {
		cfg := specConfig(22, Prefix, align.Exact)
		cfg.Tolerance = lambda
		res, e := runSpec(t, target, draft, cfg, 1500, 64)
		s := Summarize(res, e.Stats, 0)
		// the variance of the accepted count given the probabilities is at most sum a(1-a) <=
		// sum a; bounding it by the sum keeps the test free of a second accumulator
		z := (float64(s.Accepted) - s.MeanAcceptProb*float64(s.Drafted)) / math.Sqrt(s.MeanAcceptProb*float64(s.Drafted))
		t.Logf("lambda %g: alpha %.3f [%.3f, %.3f], mean acceptance probability %.3f (z %.2f), tolerance TV bias %.3f",
			lambda, s.Alpha, s.AlphaLow, s.AlphaHigh, s.MeanAcceptProb, z, s.ToleranceTVBias)
		if math.Abs(z) > 4.5 {
			t.Errorf("lambda %g: accepted %d, expected %.1f", lambda, s.Accepted, s.MeanAcceptProb*float64(s.Drafted))
		}
		if (lambda == 0) != (s.ToleranceTVBias == 0) || s.ToleranceTVBias < 0 {
			t.Errorf("lambda %g: tolerance bias %g", lambda, s.ToleranceTVBias)
		}
		if s.Alpha <= prev {
			t.Errorf("lambda %g: alpha %.3f did not rise (was %.3f)", lambda, s.Alpha, prev)
		}
		prev = s.Alpha
	}
}

// The per-token law under a tolerance (lossy.go): for p = N(0, 1), q = N(0.8, 0.7^2) and
// lambda 0.5, accepting x ~ q with min(1, e^lambda p/q) and otherwise resampling norm((p-q)+)
// gives g = min(q, e^lambda p) + (1 - alpha_lambda)(p - q)+/(1 - beta), whose distance to p is
// TV = alpha_lambda - beta. 100,000 draws: their KS distance to g's CDF (numeric, step 1e-3)
// must be below 1.95/sqrt(n) (p ~ 0.001), and their KS distance to p, a lower bound of the TV,
// must not exceed alpha_lambda - beta by more than that.
func TestToleranceOutputLaw(t *testing.T) {
	const pm, psd, qm, qsd, lambda, n = 0.0, 1.0, 0.8, 0.7, 0.5, 100000
	lv := func(sd float64) []float64 { return []float64{2 * math.Log(sd)} }
	rng := rand.New(rand.NewPCG(23, 1))
	xs := make([]float64, n)
	for i := range xs {
		x := qm + qsd*rng.NormFloat64()
		logR := math.Log(normPDF(x, pm, psd)) - math.Log(normPDF(x, qm, qsd))
		if math.Log(rng.Float64()) < logR+lambda {
			xs[i] = x
			continue
		}
		xs[i] = ResampleModified(rng, []float64{pm}, lv(psd), []float64{qm}, lv(qsd), 0, 100000).X[0]
	}
	sort.Float64s(xs)
	const lo, hi, h = -8.0, 8.0, 1e-3
	beta, alphaL := 0.0, 0.0
	for x := lo; x < hi; x += h {
		p, q := normPDF(x, pm, psd), normPDF(x, qm, qsd)
		beta += math.Min(p, q) * h
		alphaL += math.Min(q, math.Exp(lambda)*p) * h
	}
	g := func(x float64) float64 {
		p, q := normPDF(x, pm, psd), normPDF(x, qm, qsd)
		return math.Min(q, math.Exp(lambda)*p) + (1-alphaL)*math.Max(0, p-q)/(1-beta)
	}
	var ksG, ksP, cdfG, cdfP float64
	i := 0
	for x := lo; x < hi; x += h {
		cdfG += g(x+h/2) * h
		cdfP += normPDF(x+h/2, pm, psd) * h
		for i < n && xs[i] <= x+h {
			i++
		}
		emp := float64(i) / n
		ksG = math.Max(ksG, math.Abs(emp-cdfG))
		ksP = math.Max(ksP, math.Abs(emp-cdfP))
	}
	crit := 1.95 / math.Sqrt(n)
	t.Logf("beta %.4f, alpha_lambda %.4f, TV bound %.4f; KS to g %.4f, KS to p %.4f (critical %.4f)", beta, alphaL, alphaL-beta, ksG, ksP, crit)
	if ksG > crit {
		t.Errorf("draws do not follow the stated output law g: KS %.4f", ksG)
	}
	if ksP > alphaL-beta+crit {
		t.Errorf("draws are further from p (KS %.4f) than the TV bound %.4f allows", ksP, alphaL-beta)
	}
	if ksP < crit {
		t.Errorf("a tolerance of %g should move the law visibly (KS to p %.4f)", lambda, ksP)
	}
}

func TestParseRejection(t *testing.T) {
	for _, s := range []string{"residual", "target"} {
		if v, err := ParseRejection(s); err != nil || v.String() != s {
			t.Fatalf("%s: %v %v", s, v, err)
		}
	}
	if _, err := ParseRejection("draft"); err == nil {
		t.Fatal("draft accepted")
	}
	cfg := DefaultConfig()
	for _, bad := range []float64{-0.1, 11, math.NaN()} {
		cfg.Tolerance = bad
		if err := cfg.validate(); err == nil {
			t.Fatalf("tolerance %g accepted", bad)
		}
	}
}
