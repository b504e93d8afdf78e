// Package arsampler is the continuous speculative decoding loop: a draft model proposes
// tokens, the target verifies them in one batched pass, rejected tokens are resampled from the
// modified distribution. Images of one batch progress at their own pace and may join or leave
// between rounds (continuous batching).
package arsampler

import (
	"fmt"

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
	// MaxResampleTries bounds the acceptance-rejection resampler; when hit, the last proposal
	// (a draw from the target's last-step Gaussian) is used and the hit is counted.
	MaxResampleTries int
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
	return nil
}
