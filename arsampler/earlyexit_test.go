package arsampler

import (
	"strings"
	"testing"

	"marspec/align"
	"marspec/mar"
	"marspec/mar/analytic"
)

// exitParams is an analytic exit close to the test target: a slightly weaker coupling, and a
// bias at position 3 large enough (0.02, ~3 last-step standard deviations) that the exit is
// unsure there (predicted RMS error ~0.03) and its drafts are mostly rejected.
func exitParams() analytic.ExitParams {
	return analytic.ExitParams{Coupling: 0.59, Bias: []float64{0, 0.001, 0, 0.03, -0.001, 0}, Floor: 1e-6}
}

func exitTarget() *mar.Model {
	p := targetParams()
	m := analytic.WithExit(analytic.New(p), p, exitParams())
	m.Manifest.EarlyExit = &mar.EarlyExitSpec{Depth: 1, Blocks: 2, HiddenLen: 2}
	return m
}

// exitAlone is a model that samples what the exit proposes, unverified.
func exitAlone() *mar.Model {
	p, x := targetParams(), exitParams()
	p.Coupling = x.Coupling
	p.Base = append([]float64(nil), p.Base...)
	for i := range p.Base {
		p.Base[i] += x.Bias[i]
	}
	return analytic.New(p)
}

// Early-exit drafting with prefix verification and the exact criterion is lossless: its
// sequences follow the target-only sampler's joint law, with the confidence bound on and off.
// Same sample size and thresholds as TestExactPrefixMatchesTarget (3000 per side, 12
// coordinates, mean |z| < 4.5, variance ratio within 12%, projected KS < 1.95): gamma 3 with 2
// pre-filled tokens and no bound, and gamma 4 with no pre-filling, CFG 2.5 and the bound at
// 0.01 (drafting stops before position 3). As a check of the comparison's power, the exit's
// own samples, unverified, must fail it.
func TestEarlyExitExactPrefixMatchesTarget(t *testing.T) {
	target := exitTarget()
	const n = 3000
	for _, c := range []struct {
		seed    uint64
		gamma   int
		prefill float64
		cfg     float64
		bound   float64
	}{{1, 3, 0.2, 1, 0}, {2, 4, 0, 2.5, 0.01}} {
		cfg := specConfig(c.seed, Prefix, align.Exact)
		cfg.Gamma, cfg.Prefill, cfg.Sampling.CFG, cfg.EarlyExit, cfg.ExitMaxError = c.gamma, c.prefill, c.cfg, true, c.bound
		spec, e := runSpec(t, target, nil, cfg, n, 64)
		ref := runTargetOpt(t, target, mar.Options{Seed: c.seed + 100, CFG: c.cfg}, n)
		rep := compareSamples(tokensOf(spec), ref, 8)
		s := Summarize(spec, e.Stats, 0)
		var tot ImageStats
		for _, r := range spec {
			tot.Add(r.Stats)
		}
		t.Logf("%+v: alpha %.3f (%d of %d), exit stops %d, tokens per target pass %.2f; mean |z| max %.2f, var rel max %.3f, KS max %.2f",
			c, s.Alpha, s.Accepted, s.Drafted, tot.ExitStops, s.TokensPerTarget, rep.maxMeanZ, rep.maxVarRel, rep.maxKS)
		if rep.maxMeanZ > 4.5 || rep.maxVarRel > 0.12 || rep.maxKS > 1.95 {
			t.Errorf("%+v: early-exit samples differ from the target's: %+v", c, rep)
		}
		if s.Alpha < 0.1 || s.Alpha > 0.95 {
			t.Errorf("alpha %.3f: the test model should accept some drafts and reject others", s.Alpha)
		}
		// every context an exit pass drafted from is finished by exactly one verification row
		if e.Stats.TargetRows != e.Stats.DraftRows || e.Stats.TargetForwards != e.Stats.Rounds {
			t.Errorf("exit rows %d, verification rows %d, target passes %d, rounds %d", e.Stats.DraftRows,
				e.Stats.TargetRows, e.Stats.TargetForwards, e.Stats.Rounds)
		}
		if tot.DraftCalls != e.Stats.DraftRows {
			t.Errorf("draft calls %d != exit rows %d", tot.DraftCalls, e.Stats.DraftRows)
		}
		drafted3 := tot.AcceptedAtPos[3] + tot.RejectedAtPos[3]
		if c.bound > 0 && (drafted3 != 0 || tot.ExitStops == 0) {
			t.Errorf("bound %g: %d drafts at the unsure position 3, %d stops", c.bound, drafted3, tot.ExitStops)
		}
		if c.bound == 0 && (drafted3 == 0 || tot.ExitStops != 0) {
			t.Errorf("no bound: %d drafts at position 3, %d stops", drafted3, tot.ExitStops)
		}
	}
	alone := runTargetOpt(t, exitAlone(), mar.Options{Seed: 300}, n)
	ref := runTargetOpt(t, target, mar.Options{Seed: 301}, n)
	prep := compareSamples(alone, ref, 8)
	t.Logf("exit alone vs target: mean |z| max %.2f, var rel max %.3f, KS max %.2f", prep.maxMeanZ, prep.maxVarRel, prep.maxKS)
	if prep.maxMeanZ <= 4.5 && prep.maxVarRel <= 0.12 && prep.maxKS <= 1.95 {
		t.Errorf("the comparison cannot tell the exit's samples from the target's law: %+v", prep)
	}
}

// The analytic exit's Rest over Draft's hidden states gives the target transformer's z.
func TestAnalyticExitRestEqualsTransformer(t *testing.T) {
	target := exitTarget()
	L, D, W := testL, testD, target.Manifest.Width
	ctx := mar.NewContextBatch(3, L, D)
	for r := 0; r < 3; r++ {
		ctx.ClassIDs[r] = int64(r)
		for pos := 0; pos < r*2; pos++ {
			ctx.Set(r, pos, []float64{0.1 * float64(pos), -0.05 * float64(r)})
		}
	}
	want, wantU := make([]float32, 3*L*W), make([]float32, 3*L*W)
	if err := ctx.Condition(target.Transformer, want, wantU); err != nil {
		t.Fatal(err)
	}
	pass, err := mar.RunExitDraft(target.Exit, ctx, W, true)
	if err != nil {
		t.Fatal(err)
	}
	var hidden, masks [][]float32
	for r := 0; r < 3; r++ {
		hidden = append(hidden, pass.HiddenRow(r))
		masks = append(masks, ctx.Mask[r*L:(r+1)*L])
	}
	z, zu, err := mar.FinishExit(target.Exit, hidden, masks, L, W, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if d := z[i] - want[i]; d > 1e-6 || d < -1e-6 {
			t.Fatalf("z[%d] = %v, transformer %v", i, z[i], want[i])
		}
		if d := zu[i] - wantU[i]; d > 1e-6 || d < -1e-6 {
			t.Fatalf("zu[%d] = %v, transformer %v", i, zu[i], wantU[i])
		}
	}
}

// Early-exit drafting refuses what it cannot do, saying what is allowed.
func TestEarlyExitConfigErrors(t *testing.T) {
	plain := analytic.New(targetParams())
	for _, c := range []struct {
		model *mar.Model
		edit  func(*Config)
		want  string
	}{
		{plain, func(c *Config) {}, "no early_exit graphs"},
		{exitTarget(), func(c *Config) { c.Verify = Group }, "prefix only"},
		{exitTarget(), func(c *Config) { c.Schedule = Lazy }, "batched rounds only"},
		{exitTarget(), func(c *Config) { c.ExitMaxError = -1 }, "exit max error"},
	} {
		cfg := specConfig(1, Prefix, align.Exact)
		cfg.EarlyExit = true
		c.edit(&cfg)
		_, err := NewEngine(c.model, nil, cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error containing %q, got %v", c.want, err)
		}
	}
}
