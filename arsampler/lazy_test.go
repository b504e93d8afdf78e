package arsampler

import (
	"testing"

	"marspec/align"
	"marspec/mar/analytic"
)

// The lazy schedule computes only the contexts a batched round would consult, with the same
// noise and the same draws, so it must give the same tokens and the same statistics, with fewer
// rows. Checked for both criteria, gamma 1 (bonus every accepted round), 3, and beyond the
// tokens left, with prefill 0 and 0.2, and with CFG.
func TestLazyScheduleEqualsBatched(t *testing.T) {
	target, draft := analytic.New(targetParams()), analytic.New(draftParams())
	for _, c := range []struct {
		gamma   int
		prefill float64
		crit    align.Criterion
		cfg     float64
	}{{3, 0.2, align.Exact, 1}, {3, 0.2, align.Paper, 1}, {1, 0, align.Exact, 1}, {20, 0.2, align.Exact, 1},
		{3, 0, align.Paper, 2.5}} {
		cfg := specConfig(11, Prefix, c.crit)
		cfg.Gamma, cfg.Prefill, cfg.Sampling.CFG = c.gamma, c.prefill, c.cfg
		batched, eb := runSpec(t, target, draft, cfg, 40, 16)
		cfg.Schedule = Lazy
		lazy, el := runSpec(t, target, draft, cfg, 40, 16)
		var sb, sl ImageStats
		for i := range batched {
			sb.Add(batched[i].Stats)
			sl.Add(lazy[i].Stats)
			for k := range batched[i].Tokens {
				if batched[i].Tokens[k] != lazy[i].Tokens[k] {
					t.Fatalf("%+v: image %d token value %d differs: batched %v, lazy %v", c, i, k, batched[i].Tokens[k], lazy[i].Tokens[k])
				}
			}
		}
		if sb.Accepted != sl.Accepted || sb.Drafted != sl.Drafted || sb.Bonus != sl.Bonus || sb.Tries != sl.Tries {
			t.Fatalf("%+v: statistics differ: batched %d/%d bonus %d tries %d, lazy %d/%d bonus %d tries %d", c,
				sb.Accepted, sb.Drafted, sb.Bonus, sb.Tries, sl.Accepted, sl.Drafted, sl.Bonus, sl.Tries)
		}
		if sb.Drafted == 0 || sb.Accepted == 0 || sb.Accepted == sb.Drafted {
			t.Fatalf("%+v: the pair should accept some drafts and reject others (%d of %d)", c, sb.Accepted, sb.Drafted)
		}
		t.Logf("%+v: alpha %.2f; target rows batched %d, lazy %d; draft rows batched %d, lazy %d; target passes %d vs %d",
			c, sb.Alpha(), eb.Stats.TargetRows, el.Stats.TargetRows, eb.Stats.DraftRows, el.Stats.DraftRows,
			eb.Stats.TargetForwards, el.Stats.TargetForwards)
		if c.gamma > 1 && el.Stats.TargetRows >= eb.Stats.TargetRows {
			t.Fatalf("%+v: lazy used %d target rows, batched %d", c, el.Stats.TargetRows, eb.Stats.TargetRows)
		}
	}
}

func TestParseSchedule(t *testing.T) {
	for _, s := range []string{"batched", "lazy"} {
		if v, err := ParseSchedule(s); err != nil || v.String() != s {
			t.Fatalf("%s: %v %v", s, v, err)
		}
	}
	if _, err := ParseSchedule("eager"); err == nil {
		t.Fatal("eager accepted")
	}
}

// Lazy speedup: one target row per token plus c per draft row. Checked against the formula's
// two limits (a free draft gives 1; alpha 0 gives 1/(1+c)) and a hand value.
func TestPredictedSpeedupLazy(t *testing.T) {
	if s := PredictedSpeedupLazy(0.5, 0, 8); s != 1 {
		t.Fatalf("free draft: %v", s)
	}
	if s := PredictedSpeedupLazy(0, 0.25, 8); s != 1/1.25 {
		t.Fatalf("alpha 0: %v, want 0.8", s)
	}
	// alpha 0.5, gamma 2: tokens 1.75, draft rows 1.5, c 0.2 -> 1.75 / 2.05
	if s := PredictedSpeedupLazy(0.5, 0.2, 2); abs(s-1.75/2.05) > 1e-12 {
		t.Fatalf("alpha 0.5 gamma 2: %v", s)
	}
	if g := bestGammaBy(PredictedSpeedupLazy, 0.9, 0.01, 32); g != 0 {
		t.Fatalf("lazy speculation never pays on a per-row cost model; auto chose %d", g)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// Only prefix rounds can be lazy: a group configuration keeps the paper's cost model whatever
// its schedule says.
func TestConfigSpeedupModel(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Schedule = Lazy
	if got, want := cfg.PredictedSpeedup(0.5, 0.2, 4), PredictedSpeedupLazy(0.5, 0.2, 4); got != want {
		t.Fatalf("lazy prefix: %v, want %v", got, want)
	}
	cfg.Verify = Group
	if got, want := cfg.PredictedSpeedup(0.5, 0.2, 4), PredictedSpeedup(0.5, 0.2, 4); got != want {
		t.Fatalf("lazy group: %v, want the paper's %v", got, want)
	}
}
