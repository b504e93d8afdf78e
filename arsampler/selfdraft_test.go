package arsampler

import (
	"testing"

	"marspec/align"
	"marspec/mar"
	"marspec/mar/analytic"
)

// selfTargetParams is the test target with a weaker coupling: with the default 0.6 one added
// token moves a position's mean by ~10 last-step standard deviations, so a draft from a pass
// one token stale is almost never accepted (alpha ~0.08). At 0.2, alpha is ~0.2 and MAR's
// parallel decoding from the same model still differs from its one-token-per-step law by many
// standard errors (checked below), so the comparison can tell a verified sampler from an
// unverified one.
func selfTargetParams() analytic.Params {
	p := targetParams()
	p.Name = "self-target"
	p.Coupling = 0.2
	return p
}

// runTargetOpt samples n images (classes i%3) with the model alone under opt.
func runTargetOpt(t *testing.T, m *mar.Model, opt mar.Options, n int) [][]float32 {
	t.Helper()
	classes := make([]int, n)
	for i := range classes {
		classes[i] = i % 3
	}
	opt.Steps, opt.FinalStepNoise, opt.Batch = testSteps, true, 256
	imgs, err := m.Generate(classes, opt)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, n)
	for i, im := range imgs {
		out[i] = im.Tokens
	}
	return out
}

// Self-drafting with prefix verification and the exact criterion is lossless: its sequences
// follow the target-only sampler's joint law. The same sample size and thresholds as
// TestExactPrefixMatchesTarget (3000 per side, 12 coordinates, mean |z| < 4.5, variance ratio
// within 12%, projected KS < 1.95), for two settings: gamma 3 with 2 pre-filled tokens, and
// gamma 4 with no pre-filling (the first round is a plain target step) under CFG 2.5. As a
// check of the comparison's power, MAR's parallel decoding of the same model (3 tokens per step,
// i.e. drafts from a stale pass taken unverified) must fail it.
func TestSelfDraftExactPrefixMatchesTarget(t *testing.T) {
	target := analytic.New(selfTargetParams())
	const n = 3000
	for _, c := range []struct {
		seed    uint64
		gamma   int
		prefill float64
		cfg     float64
	}{{1, 3, 0.2, 1}, {2, 4, 0, 2.5}} {
		cfg := specConfig(c.seed, Prefix, align.Exact)
		cfg.Gamma, cfg.Prefill, cfg.Sampling.CFG = c.gamma, c.prefill, c.cfg
		spec, e := runSpec(t, target, nil, cfg, n, 64)
		ref := runTargetOpt(t, target, mar.Options{Seed: c.seed + 100, CFG: c.cfg}, n)
		rep := compareSamples(tokensOf(spec), ref, 8)
		s := Summarize(spec, e.Stats, 0)
		t.Logf("%+v: alpha %.3f (%d of %d), tokens per target pass %.2f, rows per token %.2f; mean |z| max %.2f, var rel max %.3f, KS max %.2f",
			c, s.Alpha, s.Accepted, s.Drafted, s.TokensPerTarget, s.RowsPerToken, rep.maxMeanZ, rep.maxVarRel, rep.maxKS)
		if rep.maxMeanZ > 4.5 || rep.maxVarRel > 0.12 || rep.maxKS > 1.95 {
			t.Errorf("%+v: self-drafted samples differ from the target's: %+v", c, rep)
		}
		if s.Alpha < 0.1 || s.Alpha > 0.95 {
			t.Errorf("alpha %.3f: the test model should accept some drafts and reject others", s.Alpha)
		}
		if e.Stats.DraftForwards != 0 || e.Stats.DraftRows != 0 || e.Stats.DraftHeadRows == 0 {
			t.Errorf("self-drafting ran a draft network or no draft head: %+v", e.Stats)
		}
		// batched: one target pass per round and nothing else sequential but the head run
		if e.Stats.TargetForwards != e.Stats.Rounds {
			t.Errorf("%d target passes for %d rounds", e.Stats.TargetForwards, e.Stats.Rounds)
		}
		par := runTargetOpt(t, target, mar.Options{Seed: c.seed + 200, CFG: c.cfg, NumIter: 2}, n)
		prep := compareSamples(par, ref, 8)
		t.Logf("parallel decoding (num_iter 2) vs one token per step: mean |z| max %.2f, var rel max %.3f, KS max %.2f",
			prep.maxMeanZ, prep.maxVarRel, prep.maxKS)
		if prep.maxMeanZ <= 4.5 && prep.maxVarRel <= 0.12 && prep.maxKS <= 1.95 {
			t.Errorf("the comparison cannot tell parallel decoding from the target's law on this model: %+v", prep)
		}
	}
}

// After every round, each image's self-draft cache must be the target's conditioning over its
// verified tokens minus the last one fixed (the newest pass whose context is all verified: the
// row before the first rejection, or the bonus row), never a row holding a rejected draft.
// Checked bit for bit against a fresh target pass, batched and lazy, gamma 3 and 1.
func TestSelfDraftUsesNewestVerifiedPass(t *testing.T) {
	target := analytic.New(selfTargetParams())
	W := target.Manifest.Width
	for _, sch := range []Schedule{Batched, Lazy} {
		for _, gamma := range []int{3, 1} {
			cfg := specConfig(9, Prefix, align.Exact)
			cfg.Gamma, cfg.Schedule = gamma, sch
			e, err := NewEngine(target, nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Add(jobs(12)...); err != nil {
				t.Fatal(err)
			}
			checked := 0
			for e.Active() > 0 {
				if _, err := e.Round(); err != nil {
					t.Fatal(err)
				}
				for _, st := range e.active {
					ctx := mar.NewContextBatch(1, e.L, e.D)
					copy(ctx.Tokens, st.tokens)
					copy(ctx.Mask, st.mask)
					ctx.Mask[st.order[st.known-1]] = 1 // the last token fixed is not in the pass
					ctx.ClassIDs[0] = int64(st.job.Class)
					z := make([]float32, e.L*W)
					if err := ctx.Condition(target.Transformer, z, nil); err != nil {
						t.Fatal(err)
					}
					for i := range z {
						if z[i] != st.zSelf[i] {
							t.Fatalf("%v gamma %d: image %d with %d tokens: cached pass is not the newest verified one", sch, gamma, st.job.Index, st.known)
						}
					}
					checked++
				}
			}
			if checked == 0 {
				t.Fatal("nothing checked")
			}
		}
	}
}

// The lazy schedule self-drafts the same tokens as the batched one (the drafts are fixed by the
// round's cached pass), with the same statistics and fewer target rows.
func TestSelfDraftLazyEqualsBatched(t *testing.T) {
	target := analytic.New(selfTargetParams())
	cfg := specConfig(12, Prefix, align.Exact)
	cfg.Gamma, cfg.Sampling.CFG = 4, 2
	batched, eb := runSpec(t, target, nil, cfg, 40, 16)
	cfg.Schedule = Lazy
	lazy, el := runSpec(t, target, nil, cfg, 40, 16)
	var sb, sl ImageStats
	for i := range batched {
		sb.Add(batched[i].Stats)
		sl.Add(lazy[i].Stats)
		for k := range batched[i].Tokens {
			if batched[i].Tokens[k] != lazy[i].Tokens[k] {
				t.Fatalf("image %d token value %d differs: batched %v, lazy %v", i, k, batched[i].Tokens[k], lazy[i].Tokens[k])
			}
		}
	}
	if sb.Accepted != sl.Accepted || sb.Drafted != sl.Drafted || sb.DraftCalls != sl.DraftCalls {
		t.Fatalf("statistics differ: batched %+v, lazy %+v", sb, sl)
	}
	t.Logf("alpha %.2f; target rows batched %d, lazy %d; target passes %d vs %d", sb.Alpha(),
		eb.Stats.TargetRows, el.Stats.TargetRows, eb.Stats.TargetForwards, el.Stats.TargetForwards)
	if el.Stats.TargetRows >= eb.Stats.TargetRows || el.Stats.TargetForwards <= eb.Stats.TargetForwards {
		t.Fatalf("lazy should read fewer rows in more passes")
	}
}

// NewEngine with a nil draft self-drafts; a draft pack given with SelfDraft set is ignored.
func TestNilDraftMeansSelfDraft(t *testing.T) {
	target, draft := analytic.New(selfTargetParams()), analytic.New(draftParams())
	cfg := specConfig(13, Prefix, align.Exact)
	a, _ := runSpec(t, target, nil, cfg, 6, 6)
	cfg.SelfDraft = true
	b, e := runSpec(t, target, draft, cfg, 6, 6)
	if e.Stats.DraftForwards != 0 {
		t.Fatal("the draft pack ran although SelfDraft was set")
	}
	for i := range a {
		for k := range a[i].Tokens {
			if a[i].Tokens[k] != b[i].Tokens[k] {
				t.Fatalf("image %d differs between a nil draft and SelfDraft", i)
			}
		}
	}
}
