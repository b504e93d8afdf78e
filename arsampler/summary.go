package arsampler

import "math"

// Summary is the statistics of one speculative run, as the CLI and the service report them.
type Summary struct {
	Images int     `json:"images"`
	Alpha  float64 `json:"alpha"`
	// Hoeffding interval of alpha at AlphaConfidence, treating the judged drafts as independent
	// (seed 000, section 3.5); drafts of one image are not quite, so the image-level interval
	// below is the one that holds without that assumption
	AlphaLow        float64 `json:"alpha_low"`
	AlphaHigh       float64 `json:"alpha_high"`
	AlphaConfidence float64 `json:"alpha_confidence"`
	// mean acceptance probability of the judged drafts: alpha's Rao-Blackwellised estimate
	MeanAcceptProb float64 `json:"mean_accept_prob"`
	// mean of the per-image alphas over images with drafts, with its Hoeffding interval: images
	// are independent, so this one is valid as stated
	ImageAlphaMean  float64 `json:"image_alpha_mean"`
	ImageAlphaLow   float64 `json:"image_alpha_low"`
	ImageAlphaHigh  float64 `json:"image_alpha_high"`
	Drafted         int     `json:"drafted"`
	Accepted        int     `json:"accepted"`
	Resampled       int     `json:"resampled"`
	Fallbacks       int     `json:"fallbacks"`
	Bonus           int     `json:"bonus"`
	Prefilled       int     `json:"prefilled"`
	TargetOnly      int     `json:"target_only"`
	TargetForwards  int     `json:"target_forwards"`
	TargetRows      int     `json:"target_rows"`
	DraftForwards   int     `json:"draft_forwards"`
	DraftRows       int     `json:"draft_rows"`
	DraftHeadRows   int     `json:"draft_head_rows"` // self-drafting: tokens drafted by the target's head
	Rounds          int     `json:"rounds"`
	MeanGamma       float64 `json:"mean_gamma"`
	TokensPerTarget float64 `json:"tokens_per_target_pass"` // tokens per image per target pass
	RowsPerToken    float64 `json:"target_rows_per_token"`
	// GPU prediction (PredictedGPUSpeedup): c from this run's timings (CostRatio), sequential
	// draft calls per round, and the speedup from the measured tokens per target pass
	CostRatio           float64 `json:"cost_ratio_c"`
	DraftCallsPerRound  float64 `json:"draft_calls_per_round"`
	PredictedGPUSpeedup float64 `json:"gpu_speedup_predicted"`
	// VerifyCost is a verification pass's GPU cost relative to the target alone's step: 1, or
	// less for early-exit drafting, whose verification runs only the blocks after the exit
	VerifyCost float64 `json:"verify_cost"`
	// mean over judged drafts of the acceptance the tolerance added: the estimated per-token TV
	// bias of the tolerance (exact criterion, residual rejection; lossy.go)
	ToleranceTVBias    float64   `json:"tolerance_tv_bias"`
	ResamplerTries     int       `json:"resampler_tries"`
	ResamplerBoundHits int       `json:"resampler_bound_hits"`
	MeanTokenDistance  float64   `json:"mean_token_distance"` // RMS draft-target distance over verified drafts
	MeanLogSigma       float64   `json:"mean_log_sigma"`
	Seconds            float64   `json:"seconds"`
	TargetSeconds      float64   `json:"target_seconds"`
	DraftSeconds       float64   `json:"draft_seconds"`
	OtherSeconds       float64   `json:"other_seconds"`
	AcceptedAtStep     []int     `json:"accepted_at_step"`
	RejectedAtStep     []int     `json:"rejected_at_step"`
	AcceptedAtPos      []int     `json:"accepted_at_pos"`
	RejectedAtPos      []int     `json:"rejected_at_pos"`
	PerImageAlpha      []float64 `json:"per_image_alpha"`
}

// Summarize adds up a run's per-image statistics and the engine's costs.
func Summarize(results []Result, es EngineStats, seconds float64) Summary {
	var tot ImageStats
	s := Summary{Images: len(results), Seconds: seconds}
	for _, r := range results {
		tot.Add(r.Stats)
		s.PerImageAlpha = append(s.PerImageAlpha, r.Stats.Alpha())
	}
	s.Alpha = tot.Alpha()
	s.AlphaLow, s.AlphaHigh = hoeffdingInterval(s.Alpha, tot.Drafted)
	s.AlphaConfidence = AlphaConfidence
	withDrafts := 0
	for _, r := range results {
		if r.Stats.Drafted > 0 {
			s.ImageAlphaMean += r.Stats.Alpha()
			withDrafts++
		}
	}
	if withDrafts > 0 {
		s.ImageAlphaMean /= float64(withDrafts)
	}
	s.ImageAlphaLow, s.ImageAlphaHigh = hoeffdingInterval(s.ImageAlphaMean, withDrafts)
	s.Drafted, s.Accepted, s.Resampled, s.Bonus = tot.Drafted, tot.Accepted, tot.Resampled, tot.Bonus
	s.Fallbacks = tot.Fallbacks
	s.Prefilled, s.TargetOnly = tot.Prefilled, tot.TargetOnly
	s.TargetForwards, s.TargetRows, s.DraftForwards, s.DraftRows = es.TargetForwards, es.TargetRows, es.DraftForwards, es.DraftRows
	s.DraftHeadRows = es.DraftHeadRows
	s.Rounds = es.Rounds
	if es.Rounds > 0 {
		s.MeanGamma = float64(es.GammaSum) / float64(es.Rounds)
	}
	tokens := 0
	for _, r := range results {
		tokens += len(r.Stats.AcceptedAtPos)
	}
	// every image takes part in one target pass per round, so tokens per pass per image is
	// tokens over the images' rounds (target-only decoding scores 1)
	s.TokensPerTarget = float64(tokens) / float64(max(tot.Rounds, 1))
	s.RowsPerToken = float64(es.TargetRows) / float64(max(tokens, 1))
	s.CostRatio = CostRatio(es)
	s.DraftCallsPerRound = float64(tot.DraftCalls) / float64(max(tot.Rounds, 1))
	s.VerifyCost = 1
	if es.ExitRestShare > 0 {
		s.CostRatio, s.VerifyCost = ExitCosts(es)
	}
	s.PredictedGPUSpeedup = PredictedGPUSpeedupVerify(s.TokensPerTarget, s.DraftCallsPerRound, s.CostRatio, s.VerifyCost)
	if tot.Drafted > 0 {
		s.ToleranceTVBias = tot.SumToleranceGain / float64(tot.Drafted)
		s.MeanAcceptProb = tot.SumAcceptProb / float64(tot.Drafted)
	}
	s.ResamplerTries, s.ResamplerBoundHits = tot.Tries, tot.BoundHits
	if tot.Drafted > 0 {
		s.MeanTokenDistance = math.Sqrt(tot.SumSquaredDistance / float64(tot.Drafted))
		s.MeanLogSigma = tot.SumLogSigma / float64(tot.Drafted)
	}
	s.TargetSeconds, s.DraftSeconds, s.OtherSeconds = es.TargetTime.Seconds(), es.DraftTime.Seconds(), es.OtherTime.Seconds()
	s.AcceptedAtStep, s.RejectedAtStep = tot.AcceptedAtStep, tot.RejectedAtStep
	s.AcceptedAtPos, s.RejectedAtPos = tot.AcceptedAtPos, tot.RejectedAtPos
	return s
}
