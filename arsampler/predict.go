package arsampler

import "math"

// AlphaConfidence is the confidence level of the reported alpha intervals.
const AlphaConfidence = 0.95

// HoeffdingHalfWidth is the half-width eps of the Hoeffding interval for the mean of n
// independent values in [0, 1] (seed 000, section 3.5): P(|mean - mu| >= eps) <= 2 exp(-2 n
// eps^2), set equal to 1 - confidence, gives eps = sqrt(ln(2 / (1 - confidence)) / (2 n)).
// Distribution-free, hence wide: at 95% and n = 1000 it is 0.043. n = 0 gives 1.
func HoeffdingHalfWidth(n int, confidence float64) float64 {
	if n <= 0 {
		return 1
	}
	return math.Sqrt(math.Log(2/(1-confidence)) / (2 * float64(n)))
}

// hoeffdingInterval is mean -/+ the half-width, clipped to [0, 1].
func hoeffdingInterval(mean float64, n int) (lo, hi float64) {
	eps := HoeffdingHalfWidth(n, AlphaConfidence)
	return math.Max(0, mean-eps), math.Min(1, mean+eps)
}

// PredictedGPUSpeedup is the speedup over one-token-per-step target decoding expected on a GPU,
// where a batched pass costs about one pass whatever its rows (up to saturation), so the gamma+1
// contexts of a prefix round cost one pass:
//
//	S = tokensPerPass / (1 + c * draftCallsPerRound)
//
// The target alone takes one pass per token; a speculative image takes one target pass per
// round, yielding tokensPerPass tokens, plus draftCallsPerRound sequential draft calls costing c
// passes each: gamma draft AR steps with a draft network, one batched head run self-drafting.
// With prefix verification tokensPerPass = (1 - alpha^(gamma+1)) / (1 - alpha) and, with a
// draft network, this is the paper's (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1));
// self-drafting it is (1 - alpha^(gamma+1)) / ((1 - alpha)(1 + c)), c the cost of the draft
// head runs alone. The CPU-side work (acceptance, resampling) is left out.
func PredictedGPUSpeedup(tokensPerPass, draftCallsPerRound, c float64) float64 {
	return PredictedGPUSpeedupVerify(tokensPerPass, draftCallsPerRound, c, 1)
}

// PredictedGPUSpeedupVerify is PredictedGPUSpeedup with a verification pass costing v target
// steps instead of one (early-exit drafting: ExitCosts).
func PredictedGPUSpeedupVerify(tokensPerPass, draftCallsPerRound, c, v float64) float64 {
	return tokensPerPass / (v + c*draftCallsPerRound)
}

// TokensPerRound is the expected tokens of a prefix round with gamma drafts at acceptance
// alpha: 1 + alpha + ... + alpha^gamma (the capped geometric law, seed 000 Eq. 4).
func TokensPerRound(alpha float64, gamma int) float64 {
	if alpha >= 1 {
		return float64(gamma + 1)
	}
	return (1 - math.Pow(alpha, float64(gamma+1))) / (1 - alpha)
}

// CostRatio estimates c, the cost of one draft call relative to one target pass on a GPU, from
// a run's per-token CPU times, assuming a GPU runs a batch of rows in about the time of one row
// for both networks: the time per drafted token (a draft network's transformer row and head run,
// or self-drafting the head run alone) over the target's time per row plus per head run.
// 0 when nothing was drafted or timed.
func CostRatio(es EngineStats) float64 {
	drafted := es.DraftRows + es.DraftHeadRows
	if drafted == 0 || es.TargetRows == 0 || es.TargetTokens == 0 {
		return 0
	}
	transformer := (es.TargetTime - es.TargetHeadTime).Seconds() / float64(es.TargetRows)
	head := es.TargetHeadTime.Seconds() / float64(es.TargetTokens)
	if transformer+head <= 0 {
		return 0
	}
	return es.DraftTime.Seconds() / float64(drafted) / (transformer + head)
}

// ExitCosts are early-exit drafting's GPU costs from a run's per-row CPU times (rows assumed
// free on a GPU, as in CostRatio), relative to the target alone's step, a full transformer pass
// plus a head run: c for one exit pass (first blocks + exit) with its share of draft head runs
// (the bonus row's pass and a stopped depth sample nothing), v for the verification pass (the
// remaining blocks) plus a head run. Early-exit runs never make a full pass, so its transformer
// time is the remaining blocks' time per row over their share of the blocks (the blocks cost
// alike: same width, same rows). Then
//
//	S = tokensPerPass / (v + c * draftCallsPerRound)
//
// with draftCallsPerRound the sequential exit passes of a round. Zeroes when nothing was timed.
func ExitCosts(es EngineStats) (c, v float64) {
	if es.ExitRestShare <= 0 || es.TargetRows == 0 || es.TargetTokens == 0 || es.DraftRows == 0 {
		return 0, 0
	}
	rest := (es.TargetTime - es.TargetHeadTime).Seconds() / float64(es.TargetRows)
	head := es.TargetHeadTime.Seconds() / float64(es.TargetTokens)
	exit := es.ExitTime.Seconds() / float64(es.DraftRows)
	step := rest/es.ExitRestShare + head
	if step <= 0 {
		return 0, 0
	}
	draftHeads := float64(es.DraftHeadRows) / float64(es.DraftRows)
	return (exit + head*draftHeads) / step, (rest + head) / step
}
