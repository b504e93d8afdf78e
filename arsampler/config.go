// Package arsampler is the continuous speculative decoding loop: a draft model proposes
// tokens, the target verifies them in one batched pass, rejected tokens are resampled from the
// modified distribution. Images of one batch progress at their own pace and may join or leave
// between rounds (continuous batching).
package arsampler

import (
	"fmt"
	"math"

	"marspec/align"
	"marspec/mar"
)

// Verify selects how the target checks a round of drafts.
type Verify int

const (
	// Prefix is the paper's Algorithm 1: gamma+1 target contexts (verified + drafts 1..i-1),
	// first rejection ends the round, a bonus token when all pass.
	Prefix Verify = iota
	// Group is one target context per image (the verified tokens only) predicting all drafted
	// positions; each drafted token is accepted or resampled on its own (the paper's code).
	Group
)

// ParseVerify reads "prefix" or "group".
func ParseVerify(s string) (Verify, error) {
	switch s {
	case "prefix":
		return Prefix, nil
	case "group":
		return Group, nil
	}
	return 0, fmt.Errorf("verify %q unknown (allowed: prefix, group)", s)
}

func (v Verify) String() string {
	if v == Group {
		return "group"
	}
	return "prefix"
}

// Schedule is how the passes of a prefix round are laid out in time.
type Schedule int

const (
	// Batched drafts gamma tokens, then scores all gamma+1 target contexts in one pass: few
	// sequential calls, gamma+1 rows per image (right for a GPU, where rows are nearly free).
	Batched Schedule = iota
	// Lazy drafts token j and scores target context j only for images whose drafts 0..j-1 were
	// all accepted: up to 2*gamma+1 sequential calls, but about 1/(1-alpha) rows per image
	// (right for a CPU, where cost grows with rows). Draft j and context j depend only on the
	// tokens before them and on per-(image, position) noise, so the images are the same as
	// Batched's, draw for draw.
	Lazy
)

// ParseSchedule reads "batched" or "lazy".
func ParseSchedule(s string) (Schedule, error) {
	switch s {
	case "batched":
		return Batched, nil
	case "lazy":
		return Lazy, nil
	}
	return 0, fmt.Errorf("schedule %q unknown (allowed: batched, lazy)", s)
}

func (s Schedule) String() string {
	if s == Lazy {
		return "lazy"
	}
	return "batched"
}

// runsLazy reports whether rounds take the lazy path: only prefix rounds have depths to skip.
func (c Config) runsLazy() bool { return c.Verify == Prefix && c.Schedule == Lazy }

// PredictedSpeedup is the expected speedup over the target alone under this configuration's
// cost model: PredictedSpeedupLazy for lazy prefix rounds, the paper's formula otherwise.
func (c Config) PredictedSpeedup(alpha, cost float64, gamma int) float64 {
	if c.runsLazy() {
		return PredictedSpeedupLazy(alpha, cost, gamma)
	}
	return PredictedSpeedup(alpha, cost, gamma)
}

// Config is everything that decides how a speculative run samples.
type Config struct {
	Sampling   mar.Options // seed, CFG, temperature, diffusion steps (one token per AR step)
	Gamma      int         // drafts per round; ignored when AutoGamma
	AutoGamma  bool        // choose gamma per round from running alpha and cost ratio c
	GammaMax   int         // upper bound for AutoGamma (default 32)
	Prefill    float64     // fraction of tokens the target generates alone first
	Verify     Verify
	Acceptance align.Criterion
	Align      bool // shared noise between draft and target
	// Schedule is how a prefix round is computed: Batched (the paper's one target pass over
	// gamma+1 contexts) or Lazy (depth by depth, only for images still accepting). Both give the
	// same tokens; they differ in cost. Group verification always runs batched.
	Schedule Schedule
	// MaxResampleTries bounds the acceptance-rejection resampler; when hit, the last proposal
	// (a draw from the target's last-step Gaussian) is used and the hit is counted.
	MaxResampleTries int
	// SelfDraft drafts with the target itself instead of a draft network: the drafts of a round
	// are the target head's samples from the conditioning of the target's newest pass over a
	// context the image has verified (selfdraft.go explains why prefix + exact stays lossless).
	// NewEngine with a nil draft model sets it.
	SelfDraft bool
	// Rejection is what replaces a rejected draft: Residual (lossless with the exact criterion)
	// or Target (seed 000's practical variant: the target's own draw, lossy).
	Rejection Rejection
	// Tolerance lambda >= 0 (nats) relaxes acceptance to min(1, e^lambda * r); 0 = off. Lossy
	// for lambda > 0 (lossy.go bounds the bias).
	Tolerance float64
	// EarlyExit drafts with the target's own first blocks and the pack's trained exit
	// (earlyexit.go); verification finishes the drafted contexts from their cached hidden
	// states. Prefix verification, batched schedule only.
	EarlyExit bool
	// ExitMaxError bounds an early-exit round's speculation by the exit's confidence: drafting
	// stops at the first position whose predicted RMS error of the exit's z exceeds it (the
	// round's gamma is then a ceiling). 0 = no bound.
	ExitMaxError float64
}

// DefaultConfig is the CLI's default: gamma 8, prefill 5%, prefix verification, the paper's
// criterion, alignment on.
func DefaultConfig() Config {
	return Config{Gamma: 8, GammaMax: 32, Prefill: 0.05, Verify: Prefix, Acceptance: align.Paper,
		Align: true, MaxResampleTries: 1000}
}

func (c *Config) validate() error {
	if !c.AutoGamma && (c.Gamma < 1 || c.Gamma > 256) {
		return fmt.Errorf("gamma %d out of range (allowed: 1 to 256, or auto)", c.Gamma)
	}
	if c.GammaMax == 0 {
		c.GammaMax = 32
	}
	if c.GammaMax < 1 || c.GammaMax > 256 {
		return fmt.Errorf("gamma max %d out of range (allowed: 1 to 256)", c.GammaMax)
	}
	if c.MaxResampleTries == 0 {
		c.MaxResampleTries = 1000
	}
	if c.MaxResampleTries < 1 {
		return fmt.Errorf("max resample tries %d must be positive", c.MaxResampleTries)
	}
	if c.Rejection != Residual && c.Rejection != Target {
		return fmt.Errorf("rejection %d unknown (allowed: residual, target)", c.Rejection)
	}
	// e^10 ~ 22000: beyond that every draft is accepted anyway
	if !(c.Tolerance >= 0 && c.Tolerance <= 10) {
		return fmt.Errorf("tolerance %g out of range (allowed: 0 = off, up to 10 nats)", c.Tolerance)
	}
	if c.EarlyExit {
		switch {
		case c.Verify != Prefix:
			return fmt.Errorf("draft exit verifies with prefix only (group has no drafted contexts to continue)")
		case c.Schedule != Batched:
			return fmt.Errorf("draft exit runs batched rounds only (a lazy round costs more than the target alone)")
		}
	}
	if !(c.ExitMaxError >= 0 && c.ExitMaxError < math.Inf(1)) {
		return fmt.Errorf("exit max error %g out of range (allowed: 0 = no bound, or a positive RMS error)", c.ExitMaxError)
	}
	return nil
}
