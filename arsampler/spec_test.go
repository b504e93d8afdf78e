package arsampler

import (
	"testing"

	"marspec/align"
	"marspec/mar/analytic"
)

func specConfig(seed uint64, verify Verify, crit align.Criterion) Config {
	cfg := DefaultConfig()
	cfg.Sampling.Seed = seed
	cfg.Sampling.Steps = testSteps
	cfg.Gamma = 3
	cfg.Prefill = 0.2 // ceil(0.2*6) = 2 tokens
	cfg.Verify = verify
	cfg.Acceptance = crit
	return cfg
}

// Exact acceptance with prefix verification is lossless: its sequences follow the target-only
// sampler's joint law. Sample size 3000 per side, 12 coordinates; thresholds: |z| of mean
// differences < 4.5, variance ratio within 12%, projected KS statistic < 1.95 (p ~ 0.001 each),
// checked for two seeds.
func TestExactPrefixMatchesTarget(t *testing.T) {
	target, draft := analytic.New(targetParams()), analytic.New(draftParams())
	const n = 3000
	for _, seed := range []uint64{1, 2} {
		spec, e := runSpec(t, target, draft, specConfig(seed, Prefix, align.Exact), n, 64)
		ref := runTarget(t, target, seed+100, n)
		rep := compareSamples(tokensOf(spec), ref, 8)
		var st ImageStats
		for _, r := range spec {
			st.Add(r.Stats)
		}
		t.Logf("seed %d: accepted %d of %d, alpha %.3f, %d target passes, mean |z| max %.2f, var rel max %.3f, KS max %.2f",
			seed, st.Accepted, st.Drafted, st.Alpha(), e.Stats.TargetForwards, rep.maxMeanZ, rep.maxVarRel, rep.maxKS)
		if rep.maxMeanZ > 4.5 || rep.maxVarRel > 0.12 || rep.maxKS > 1.95 {
			t.Errorf("seed %d: exact speculative samples differ from the target's: %+v", seed, rep)
		}
		if st.Alpha() < 0.2 || st.Alpha() > 0.95 {
			t.Errorf("alpha %.3f: the test pair should accept some and reject some", st.Alpha())
		}
	}
}

// The paper's criterion (with Sigma) is not lossless; its deviation is measured and reported.
// The assertion only guards against gross breakage (mean |z| < 30).
func TestPaperCriterionDeviationIsReported(t *testing.T) {
	target, draft := analytic.New(targetParams()), analytic.New(draftParams())
	const n = 3000
	for _, v := range []Verify{Prefix, Group} {
		spec, _ := runSpec(t, target, draft, specConfig(1, v, align.Paper), n, 64)
		rep := compareSamples(tokensOf(spec), runTarget(t, target, 101, n), 8)
		var st ImageStats
		for _, r := range spec {
			st.Add(r.Stats)
		}
		t.Logf("acceptance=paper verify=%s: alpha %.3f; vs target-only: max mean |z| %.2f, max variance deviation %.1f%%, max projected KS %.2f (1.95 = p 0.001)",
			v, st.Alpha(), rep.maxMeanZ, 100*rep.maxVarRel, rep.maxKS)
		if rep.maxMeanZ > 30 {
			t.Errorf("paper criterion far off: %+v", rep)
		}
	}
}

func TestIdenticalDraftAcceptsEverything(t *testing.T) {
	target := analytic.New(targetParams())
	same := analytic.New(targetParams())
	res, _ := runSpec(t, target, same, specConfig(3, Prefix, align.Exact), 50, 8)
	for _, r := range res {
		if r.Stats.Accepted != r.Stats.Drafted || r.Stats.Resampled != 0 {
			t.Fatalf("identical draft had rejections: %+v", r.Stats)
		}
	}
	// group verification predicts each drafted position from the verified context alone, so
	// even an identical draft (which conditions on its earlier drafts) is rejected sometimes
	res, _ = runSpec(t, target, same, specConfig(3, Group, align.Exact), 50, 8)
	var st ImageStats
	for _, r := range res {
		st.Add(r.Stats)
	}
	t.Logf("identical draft, group verification: alpha %.3f", st.Alpha())
}

func TestAllRejectedStillCompletes(t *testing.T) {
	target := analytic.New(targetParams())
	far := draftParams()
	for i := range far.Base {
		far.Base[i] += 5
	}
	res, _ := runSpec(t, target, analytic.New(far), specConfig(4, Prefix, align.Exact), 20, 5)
	for _, r := range res {
		if r.Stats.Accepted != 0 || r.Stats.Resampled == 0 {
			t.Fatalf("draft 5 sd away should never be accepted: %+v", r.Stats)
		}
		if r.Stats.Prefilled+r.Stats.Resampled+r.Stats.Accepted+r.Stats.Bonus != testL {
			t.Fatalf("tokens do not add up: %+v", r.Stats)
		}
	}
}

func TestDegenerateSettings(t *testing.T) {
	target, draft := analytic.New(targetParams()), analytic.New(draftParams())
	for _, c := range []struct {
		name    string
		gamma   int
		prefill float64
		verify  Verify
	}{{"gamma beyond tokens left", 20, 0.2, Prefix}, {"gamma beyond tokens left, group", 20, 0.2, Group},
		{"prefill 0", 3, 0, Prefix}, {"prefill 1", 3, 1, Prefix}, {"gamma 1", 1, 0, Group}} {
		cfg := specConfig(5, c.verify, align.Paper)
		cfg.Gamma, cfg.Prefill = c.gamma, c.prefill
		res, _ := runSpec(t, target, draft, cfg, 7, 3)
		if len(res) != 7 {
			t.Fatalf("%s: %d results", c.name, len(res))
		}
		for _, r := range res {
			s := r.Stats
			if s.Prefilled+s.Resampled+s.Accepted+s.Bonus+s.TargetOnly != testL {
				t.Fatalf("%s: tokens do not add up to %d: %+v", c.name, testL, s)
			}
			if c.prefill == 1 && (s.Prefilled != testL || s.Drafted != 0) {
				t.Fatalf("prefill 1 must leave nothing to draft: %+v", s)
			}
			if c.prefill == 0 && s.Prefilled != 0 {
				t.Fatalf("prefill 0 pre-filled %d tokens", s.Prefilled)
			}
		}
	}
}

// Each image's randomness depends only on (seed, index): a batch of 1 and a batch of many,
// with images joining and leaving between rounds, give identical images.
func TestBatchingDoesNotChangeImages(t *testing.T) {
	target, draft := analytic.New(targetParams()), analytic.New(draftParams())
	one, _ := runSpec(t, target, draft, specConfig(6, Prefix, align.Paper), 12, 1)
	many, _ := runSpec(t, target, draft, specConfig(6, Prefix, align.Paper), 12, 5)
	for i := range one {
		for j := range one[i].Tokens {
			if one[i].Tokens[j] != many[i].Tokens[j] {
				t.Fatalf("image %d differs between batch 1 and batch 5", i)
			}
		}
	}
}

func TestAutoGammaRuns(t *testing.T) {
	target, draft := analytic.New(targetParams()), analytic.New(draftParams())
	cfg := specConfig(7, Prefix, align.Exact)
	cfg.AutoGamma = true
	res, e := runSpec(t, target, draft, cfg, 20, 10)
	if len(res) != 20 || e.Stats.Rounds == 0 {
		t.Fatalf("auto gamma run incomplete")
	}
}

func TestBestGamma(t *testing.T) {
	if g := BestGamma(0.1, 0.5, 32); g != 0 {
		t.Fatalf("alpha 0.1 with c 0.5 cannot pay; got gamma %d", g)
	}
	if g := BestGamma(0.9, 0.05, 32); g < 5 {
		t.Fatalf("alpha 0.9 with a cheap draft should draft many tokens; got %d", g)
	}
	// near-optimality condition: S grows from g to g+1 iff alpha^(g+1) >= (1+c g)/(1+c(g+1))
	alpha, c := 0.8, 0.1
	g := BestGamma(alpha, c, 64)
	if PredictedSpeedup(alpha, c, g+1) > PredictedSpeedup(alpha, c, g) || PredictedSpeedup(alpha, c, g-1) > PredictedSpeedup(alpha, c, g) {
		t.Fatalf("gamma %d is not a local maximum", g)
	}
}
