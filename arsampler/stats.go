package arsampler

import "time"

// ImageStats are the speculative statistics of one image.
type ImageStats struct {
	Prefilled  int `json:"prefilled"`   // tokens the target generated alone before speculation
	Drafted    int `json:"drafted"`     // draft tokens that were verified
	Accepted   int `json:"accepted"`    // of those, accepted
	Resampled  int `json:"resampled"`   // rejected tokens replaced from the modified distribution
	Fallbacks  int `json:"fallbacks"`   // rejected tokens replaced by the target's own draw (rejection=target)
	Bonus      int `json:"bonus"`       // target tokens after a fully accepted round
	TargetOnly int `json:"target_only"` // tokens from rounds where auto gamma chose 0
	Rounds     int `json:"rounds"`
	// DraftCalls counts the sequential draft calls the image's rounds need when laid out batched:
	// gamma draft AR steps per round with a draft network, one head run per round self-drafting
	DraftCalls int `json:"draft_calls"`
	// ExitStops counts early-exit rounds whose drafting the exit's confidence bound ended
	ExitStops int `json:"exit_stops"`
	Tries     int `json:"resampler_tries"`
	BoundHits int `json:"resampler_bound_hits"`
	// per AR step (order index) and per grid position: accepted and rejected drafts
	AcceptedAtStep []int `json:"accepted_at_step"`
	RejectedAtStep []int `json:"rejected_at_step"`
	AcceptedAtPos  []int `json:"accepted_at_pos"`
	RejectedAtPos  []int `json:"rejected_at_pos"`
	// mean squared distance between the draft's token and the target's own sample for the same
	// position and noise, over verified drafts (the paper's Table 4 distance, squared)
	SumSquaredDistance float64 `json:"sum_squared_distance"`
	SumLogSigma        float64 `json:"sum_log_sigma"`
	// sum over judged drafts of min(1, e^lambda r) - min(1, r): the acceptance the tolerance
	// added; its mean estimates the tolerance's per-token TV bias (lossy.go)
	SumToleranceGain float64 `json:"sum_tolerance_gain"`
	// sum over judged drafts of the acceptance probability used: the Rao-Blackwellised count of
	// accepted drafts (same mean, less noise)
	SumAcceptProb float64 `json:"sum_accept_prob"`
}

func newImageStats(L int) ImageStats {
	return ImageStats{AcceptedAtStep: make([]int, L), RejectedAtStep: make([]int, L),
		AcceptedAtPos: make([]int, L), RejectedAtPos: make([]int, L)}
}

// Alpha is the acceptance rate: accepted over verified drafts (0 when none were verified).
func (s ImageStats) Alpha() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// Add accumulates other into s.
func (s *ImageStats) Add(o ImageStats) {
	s.Prefilled += o.Prefilled
	s.Drafted += o.Drafted
	s.Accepted += o.Accepted
	s.Resampled += o.Resampled
	s.Fallbacks += o.Fallbacks
	s.DraftCalls += o.DraftCalls
	s.SumToleranceGain += o.SumToleranceGain
	s.SumAcceptProb += o.SumAcceptProb
	s.Bonus += o.Bonus
	s.TargetOnly += o.TargetOnly
	s.Rounds += o.Rounds
	s.ExitStops += o.ExitStops
	s.Tries += o.Tries
	s.BoundHits += o.BoundHits
	s.SumSquaredDistance += o.SumSquaredDistance
	s.SumLogSigma += o.SumLogSigma
	if s.AcceptedAtStep == nil {
		*s = newImageStats(len(o.AcceptedAtStep))
		s.Add(o)
		return
	}
	for i := range o.AcceptedAtStep {
		s.AcceptedAtStep[i] += o.AcceptedAtStep[i]
		s.RejectedAtStep[i] += o.RejectedAtStep[i]
		s.AcceptedAtPos[i] += o.AcceptedAtPos[i]
		s.RejectedAtPos[i] += o.RejectedAtPos[i]
	}
}

// EngineStats are the costs of a run: forward passes and wall time by model.
type EngineStats struct {
	TargetForwards int           `json:"target_forwards"` // batched target transformer passes
	TargetRows     int           `json:"target_rows"`     // context rows in those passes
	DraftForwards  int           `json:"draft_forwards"`
	DraftRows      int           `json:"draft_rows"`
	TargetTokens   int           `json:"target_tokens"`   // target head runs (tokens sampled by the target)
	DraftHeadRows  int           `json:"draft_head_rows"` // self-drafting: tokens drafted by the target's head
	TargetTime     time.Duration `json:"-"`
	TargetHeadTime time.Duration `json:"-"` // the part of TargetTime spent in the diffusion head
	DraftTime      time.Duration `json:"-"`
	ExitTime       time.Duration `json:"-"` // the part of DraftTime in early-exit passes (no head)
	OtherTime      time.Duration `json:"-"` // acceptance tests, resampling, bookkeeping
	Rounds         int           `json:"rounds"`
	GammaSum       int           `json:"gamma_sum"` // sum over rounds of the gamma used
	// ExitRestShare is the share of the target's transformer blocks after the early exit
	// ((blocks - depth) / blocks); 0 unless early-exit drafting
	ExitRestShare float64 `json:"exit_rest_share,omitempty"`
}
