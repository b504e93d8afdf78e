package arsampler

import (
	"math"
	"time"
)

// PredictedSpeedup is the expected wall-clock speedup of speculative decoding over the target
// alone: (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma*c + 1)), with c the cost of one draft step
// relative to one target pass (paper appendix C; seed 000 section 3.4). gamma = 0 is 1.
func PredictedSpeedup(alpha, c float64, gamma int) float64 {
	if gamma == 0 {
		return 1
	}
	var tokens float64
	if alpha >= 1 {
		tokens = float64(gamma + 1)
	} else {
		tokens = (1 - math.Pow(alpha, float64(gamma+1))) / (1 - alpha)
	}
	return tokens / (float64(gamma)*c + 1)
}

// PredictedSpeedupLazy is the same prediction for the lazy schedule on hardware whose cost grows
// with context rows (a CPU): a round yields (1 - alpha^(gamma+1)) / (1 - alpha) tokens for as many
// target rows (one per token) and (1 - alpha^gamma) / (1 - alpha) draft rows, so the speedup is
// tokens / (c*draftRows + tokens), below 1 for every gamma whenever the draft costs anything.
func PredictedSpeedupLazy(alpha, c float64, gamma int) float64 {
	if gamma == 0 {
		return 1
	}
	geometric := func(n int) float64 {
		if alpha >= 1 {
			return float64(n)
		}
		return (1 - math.Pow(alpha, float64(n))) / (1 - alpha)
	}
	tokens := geometric(gamma + 1)
	return tokens / (c*geometric(gamma) + tokens)
}

// BestGamma scans 0..maxGamma for the largest predicted speedup (the near-optimal integer rule:
// speedup grows with gamma while alpha^(gamma+1) >= (1+c*gamma)/(1+c*(gamma+1))).
func BestGamma(alpha, c float64, maxGamma int) int {
	return bestGammaBy(PredictedSpeedup, alpha, c, maxGamma)
}

func bestGammaBy(predict func(alpha, c float64, gamma int) float64, alpha, c float64, maxGamma int) int {
	best, bestS := 0, 1.0
	for g := 1; g <= maxGamma; g++ {
		if s := predict(alpha, c, g); s > bestS+1e-12 {
			best, bestS = g, s
		}
	}
	return best
}

// autoGamma keeps running estimates of alpha and c and picks gamma per round. When the best
// choice is 0 (speculation cannot pay), every probeEvery-th round still drafts one token so the
// estimates stay current.
type autoGamma struct {
	enabled           bool
	predict           func(alpha, c float64, gamma int) float64 // the schedule's cost model
	fixed, maxGamma   int
	accepted, drafted int
	draftStep, target float64 // seconds, exponential moving averages
	rounds            int
	last              int
}

const probeEvery = 4

func newAutoGamma(cfg Config) autoGamma {
	return autoGamma{enabled: cfg.AutoGamma, predict: cfg.PredictedSpeedup, fixed: cfg.Gamma, maxGamma: cfg.GammaMax}
}

// Alpha is the running acceptance estimate, (accepted+1)/(drafted+2).
func (a *autoGamma) Alpha() float64 {
	return float64(a.accepted+1) / float64(a.drafted+2)
}

// C is the measured cost of a draft AR step relative to a target pass (0.5 before measuring);
// under the lazy schedule, of a draft row relative to a target row.
func (a *autoGamma) C() float64 {
	if a.target == 0 || a.draftStep == 0 {
		return 0.5
	}
	return a.draftStep / a.target
}

func (a *autoGamma) next(cfg Config) int {
	a.rounds++
	if !a.enabled {
		a.last = a.fixed
		return a.last
	}
	g := bestGammaBy(a.predict, a.Alpha(), a.C(), a.maxGamma)
	if a.draftStep == 0 {
		g = max(g, 1) // measure the draft at least once
	}
	if g == 0 && a.rounds%probeEvery == 0 {
		g = 1
	}
	a.last = g
	return g
}

func (a *autoGamma) observeDraft(accepted bool) {
	a.drafted++
	if accepted {
		a.accepted++
	}
}

func (a *autoGamma) observeCost(draft time.Duration, steps int, target time.Duration) {
	const w = 0.2
	ema := func(old, v float64) float64 {
		if old == 0 {
			return v
		}
		return (1-w)*old + w*v
	}
	if steps > 0 {
		a.draftStep = ema(a.draftStep, draft.Seconds()/float64(steps))
	}
	a.target = ema(a.target, target.Seconds())
}
