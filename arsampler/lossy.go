package arsampler

import (
	"fmt"
	"math"

	"marspec/align"
)

// The two lossy knobs of seed 000 (sections 3.3 and 3.6), and how far each can move a token's
// law. Write p and q for the target's and the draft's last-step Gaussians of one token given the
// shared noise of its earlier steps, beta = integral of min(p, q) (the exact criterion's
// acceptance probability) and a(x) the acceptance probability actually used.
//
// Rejection=target (the practical variant, "fallback to p"): a rejected draft is replaced by the
// target's own sample at that position, which the target run of the round has already made with
// the token's shared noise, so it costs nothing (no resampler). The output is the draft when
// accepted and the target's sample X_p otherwise, so it differs from X_p only on acceptance:
// by the coupling inequality TV(output, p) <= P(accept) = alpha-bar, the token's mean
// acceptance (seed 000, Corollary 1, whose proof assumes an independent fallback draw; the
// coupling argument needs no independence, and here X_p shares the draft's noise). The bias
// vanishes only where alpha-bar does: it is largest exactly when speculation pays.
//
// Tolerance lambda (nats, >= 0): accept with a(x) = min(1, e^lambda * r(x)) instead of
// min(1, r(x)), keeping residual resampling from norm((p - q)+). With the exact criterion the
// output density is g = min(q, e^lambda p) + (1 - alpha_lambda) (p - q)+ / (1 - beta) with
// alpha_lambda = integral of min(q, e^lambda p); g <= p where p >= q and g >= p elsewhere, so
// TV(g, p) = integral over {q > p} of (min(q, e^lambda p) - p) = alpha_lambda - beta
//          <= min(e^lambda - 1, 1 - beta).
// That is the acceptance the tolerance adds, and it is measured: every judged draft adds
// a_lambda(x) - a_0(x) to ImageStats.SumToleranceGain, whose mean over drafts is an unbiased
// estimate of alpha_lambda - beta (draws x ~ q), i.e. of the per-token TV bias. With
// Rejection=target as well the coupling bound alpha-bar (now alpha_lambda) applies instead.
//
// Both bounds are per token given its context. Over a whole image the deviations add up at most
// (TV of the joint law <= sum over tokens of their expected per-token TV, by the usual hybrid
// argument), which for a practical-variant image is its expected number of accepted drafts: a
// vacuous bound above 1, so whole-image quality has to be measured (FID), not bounded.

// Rejection is what replaces a rejected draft.
type Rejection int

const (
	// Residual samples the modified distribution norm(max(0, Sigma p - q)) (the paper; lossless
	// with the exact criterion).
	Residual Rejection = iota
	// Target takes the target's own draw at that position (seed 000's practical variant).
	Target
)

// ParseRejection reads "residual" or "target".
func ParseRejection(s string) (Rejection, error) {
	switch s {
	case "residual":
		return Residual, nil
	case "target":
		return Target, nil
	}
	return 0, fmt.Errorf("rejection %q unknown (allowed: residual, target)", s)
}

func (r Rejection) String() string {
	if r == Target {
		return "target"
	}
	return "residual"
}

// Lossless reports whether the configuration's tokens follow the one-token-per-step target's law
// exactly: prefix verification, the exact criterion, residual resampling, no tolerance.
func (c Config) Lossless() bool {
	return c.Verify == Prefix && c.Acceptance == align.Exact && c.Rejection == Residual && c.Tolerance == 0
}

// acceptProb is min(1, exp(logR)), the probability of accepting a draft with log ratio logR.
func acceptProb(logR float64) float64 {
	if logR >= 0 {
		return 1
	}
	return math.Exp(logR)
}
