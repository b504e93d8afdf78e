package arsampler

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The Hoeffding interval must cover the true mean at least at its stated confidence: 2000
// repetitions of n = 200 Bernoulli(0.3) draws; coverage below 0.95 fails (being distribution-
// free it is conservative, ~0.996 here); a half-width too small by a factor 2 would cover ~0.86
// of the time, so the check has teeth.
func TestHoeffdingCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 1))
	const reps, n, mu = 2000, 200, 0.3
	covered := 0
	for r := 0; r < reps; r++ {
		k := 0
		for i := 0; i < n; i++ {
			if rng.Float64() < mu {
				k++
			}
		}
		lo, hi := hoeffdingInterval(float64(k)/n, n)
		if lo <= mu && mu <= hi {
			covered++
		}
	}
	eps := HoeffdingHalfWidth(n, AlphaConfidence)
	t.Logf("half-width %.4f at n %d; coverage %.4f", eps, n, float64(covered)/reps)
	if float64(covered)/reps < AlphaConfidence {
		t.Fatalf("coverage %.4f below %.2f", float64(covered)/reps, AlphaConfidence)
	}
	// 2 exp(-2 n eps^2) = 1 - confidence, by construction
	if got := 2 * math.Exp(-2*n*eps*eps); math.Abs(got-(1-AlphaConfidence)) > 1e-12 {
		t.Fatalf("tail bound at the half-width is %v", got)
	}
}

// With tokens per pass from the capped geometric law and gamma draft calls per round, the GPU
// prediction is the paper's formula (PredictedSpeedup); self-drafting pays c once per round.
func TestPredictedGPUSpeedup(t *testing.T) {
	for _, c := range []struct {
		alpha, cost float64
		gamma       int
	}{{0.3, 0.2, 4}, {0.8, 0.05, 8}, {0, 0.5, 2}, {1, 0.1, 3}} {
		got := PredictedGPUSpeedup(TokensPerRound(c.alpha, c.gamma), float64(c.gamma), c.cost)
		if want := PredictedSpeedup(c.alpha, c.cost, c.gamma); math.Abs(got-want) > 1e-12 {
			t.Fatalf("%+v: %v, paper formula %v", c, got, want)
		}
	}
	// alpha 0.5, gamma 2: 1.75 tokens per pass; self-drafting with c 0.1: 1.75/1.1
	if got := PredictedGPUSpeedup(TokensPerRound(0.5, 2), 1, 0.1); math.Abs(got-1.75/1.1) > 1e-12 {
		t.Fatalf("self-draft prediction %v", got)
	}
}

// c is the time per drafted token over the target's time per row plus per head run. Hand
// values: target 10 s over 100 rows, 4 s of it in 200 head runs -> 0.06 + 0.02 = 0.08 s; the
// draft 0.8 s over 40 tokens -> 0.02 s; c = 0.25.
func TestCostRatio(t *testing.T) {
	es := EngineStats{TargetRows: 100, TargetTokens: 200, TargetTime: 10 * time.Second, TargetHeadTime: 4 * time.Second,
		DraftHeadRows: 40, DraftTime: 800 * time.Millisecond}
	if c := CostRatio(es); math.Abs(c-0.25) > 1e-9 {
		t.Fatalf("c = %v, want 0.25", c)
	}
	if c := CostRatio(EngineStats{TargetRows: 1, TargetTokens: 1, TargetTime: time.Second}); c != 0 {
		t.Fatalf("nothing drafted: c = %v", c)
	}
}
