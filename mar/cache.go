package mar

import (
	"fmt"
)

// CacheSettings turn on caching across AR steps (LazyMAR-style, training-free; docs/cache.md).
// The zero value is off. Between AR steps few tokens change, so a lazy step reuses the
// previous steps' per-layer K/V: the encoder runs only the tokens revealed since the last step,
// the decoder only the tokens just revealed, the tokens to predict now and Recompute more.
type CacheSettings struct {
	On bool
	// FullSteps: the first steps run a full pass (the context changes most there).
	FullSteps int
	// RefreshEvery: after them every RefreshEvery-th step runs a full pass; 1 = every step
	// (no lazy step: today's images, bit for bit).
	RefreshEvery int
	// Recompute is how many more decoder positions a lazy step recomputes, stalest first.
	Recompute int
	// ReuseCFG: a guided lazy step runs the class half only and takes the "no class" z as
	// z minus the difference (z - z_uncond) of the last full pass, position by position.
	ReuseCFG bool
}

// Default cache settings: LazyMAR's released schedule (a full pass before step 5, then every
// 9th step), a sixteenth of the tokens recomputed beyond those that must be, and the CFG
// difference reused.
const (
	DefaultCacheFullSteps    = 5
	DefaultCacheRefreshEvery = 9
)

// DefaultCacheRecompute is the default number of extra decoder positions for L tokens.
func DefaultCacheRecompute(seqLen int) int { return seqLen / 16 }

// StepKind says what transformer call an AR step makes under the cache.
type StepKind int

const (
	// StepPlain is a full pass whose cache no later step reads: transformer.onnx, as without
	// the cache.
	StepPlain StepKind = iota
	// StepFull is a full pass through the cached graph, keeping K/V for a lazy step next.
	StepFull
	// StepLazy reuses the cache.
	StepLazy
)

func (k StepKind) String() string {
	return [...]string{"plain", "full", "lazy"}[k]
}

// Kind is the call AR step `step` of numSteps makes.
func (c CacheSettings) Kind(step, numSteps int) StepKind {
	if !c.On {
		return StepPlain
	}
	if !c.isFull(step) {
		return StepLazy
	}
	if step+1 < numSteps && !c.isFull(step+1) {
		return StepFull
	}
	return StepPlain
}

func (c CacheSettings) isFull(step int) bool {
	return step < c.FullSteps || (step-c.FullSteps)%c.RefreshEvery == 0
}

// Validate checks the settings of an enabled cache against L tokens.
func (c CacheSettings) Validate(seqLen int) error {
	if !c.On {
		return nil
	}
	switch {
	case c.FullSteps < 1:
		return fmt.Errorf("cache full_steps %d out of range (allowed: 1 or more; the first step has no cache to read)", c.FullSteps)
	case c.RefreshEvery < 1:
		return fmt.Errorf("cache refresh_every %d out of range (allowed: 1 or more; 1 = a full pass every step)", c.RefreshEvery)
	case c.Recompute < 0 || c.Recompute > seqLen:
		return fmt.Errorf("cache recompute %d out of range (allowed: 0 to %d tokens)", c.Recompute, seqLen)
	}
	return nil
}

// String is the settings in one line, for job settings and PNG provenance.
func (c CacheSettings) String() string {
	if !c.On {
		return "off"
	}
	reuse := "off"
	if c.ReuseCFG {
		reuse = "on"
	}
	return fmt.Sprintf("full_steps %d, refresh_every %d, recompute %d, cfg_reuse %s", c.FullSteps, c.RefreshEvery, c.Recompute, reuse)
}

// CacheSpec is the manifest's optional "cache" entry: the cached transformer graph
// (scripts/packs/cached_transformer.py, docs/model-pack.md).
type CacheSpec struct {
	File          string `json:"file"`
	Format        string `json:"format"`
	EncoderBlocks int    `json:"encoder_blocks"`
	DecoderBlocks int    `json:"decoder_blocks"`
}

// CacheFormat is the cached graph's interface version.
const CacheFormat = "marspec-cache/1"

func (s *CacheSpec) validate() error {
	switch {
	case s.Format != CacheFormat:
		return fmt.Errorf("cache format %q unsupported (allowed: %s)", s.Format, CacheFormat)
	case !isPackFileName(s.File):
		return fmt.Errorf("cache file %q: want a file name in the pack folder ending in .onnx", s.File)
	case s.EncoderBlocks < 1 || s.DecoderBlocks < 1:
		return fmt.Errorf("cache encoder_blocks %d / decoder_blocks %d must be positive", s.EncoderBlocks, s.DecoderBlocks)
	}
	return nil
}
