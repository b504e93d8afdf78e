package generation

import (
	"fmt"
	"time"

	"marspec/mar"
)

// What an AR step costs with the cache across AR steps on (docs/cache.md): a full step runs
// the cached graph over everything and keeps its K/V, a lazy step runs only the tokens the
// step computes against that cache, so a lazy step costs a share of a full pass. Timing both
// at open, as the plain pass is timed, keeps the estimate of a cached run from counting every
// step as a full pass.

// MeasureCacheCosts adds to c the cost of a full cached step and of a lazy one over one image
// of m (guided as c was timed), under cache (on) for a run of seqLen tokens in numIter AR
// steps. The lazy step is timed at the mean size of the run's lazy steps (the tokens it
// reveals and predicts; Recompute more in the decoder): a step's cost grows with its queries,
// so the mean size gives the mean cost.
func MeasureCacheCosts(m *mar.Model, c *Costs, cache mar.CacheSettings, seqLen, numIter int) error {
	if m.Cached == nil {
		return fmt.Errorf("timing the cache: model %s has no cached transformer", m.Manifest.Name)
	}
	size := meanLazySize(cache, seqLen, numIter)
	if size == 0 {
		return nil // no lazy step: every step is a full pass, timed as Pass
	}
	man := m.Manifest
	L, D, W := man.SeqLen(), man.TokenDim, man.Width
	// a full step (step 1) then lazy ones (step 2), whatever the run's schedule: the step
	// kind is what is timed
	timed := cache
	timed.FullSteps, timed.RefreshEvery = 1, L+2
	row := mar.CacheRow{Cache: &mar.ImageCache{}, Tokens: make([]float32, L*D), Mask: make([]float32, L),
		Guided: c.Guided, Settings: timed, Step: 1, NumSteps: L + 2}
	defer row.Cache.Release()
	z := make([]float32, L*W)
	var zu []float32
	if c.Guided {
		zu = make([]float32, L*W)
	}
	known := 0
	step := func() error {
		if known == 0 || known+size > L {
			known = 0 // the positions repeat; what is timed is the call, not the image
			for i := range row.Mask {
				row.Mask[i] = 1
			}
		}
		row.Predict = row.Predict[:0]
		for p := known; p < known+size; p++ {
			row.Predict = append(row.Predict, p)
		}
		err := m.ConditionCached([]mar.CacheRow{row}, z, zu)
		for _, p := range row.Predict {
			row.Mask[p] = 0
		}
		known += size
		return err
	}
	if k := timed.Kind(1, row.NumSteps); k != mar.StepFull {
		return fmt.Errorf("timing the cache: step 1 is %s, want full", k)
	}
	full, err := fastest(step)
	if err != nil {
		return fmt.Errorf("timing a full cached step: %w", err)
	}
	row.Step = 2
	lazy, err := fastest(step)
	if err != nil {
		return fmt.Errorf("timing a lazy cached step: %w", err)
	}
	c.Full, c.Lazy, c.LazySize = full, lazy, size
	return nil
}

// meanLazySize is the mean number of tokens a lazy step of the run predicts (rounded, at
// least 1); 0 when the run has no lazy step.
func meanLazySize(cache mar.CacheSettings, seqLen, numIter int) int {
	sizes := mar.StepSizes(seqLen, numIter)
	tokens, steps := 0, 0
	for k, size := range sizes {
		if cache.Kind(k, len(sizes)) == mar.StepLazy {
			tokens += size
			steps++
		}
	}
	if steps == 0 {
		return 0
	}
	return max(1, (tokens+steps/2)/steps)
}

// pass is what AR step k of steps costs in transformer calls: a plain pass without the cache
// (or when the cache was not timed), else the cost of the step's kind.
func (c Costs) pass(opt mar.Options, k, steps int) time.Duration {
	if !opt.Cache.On || c.Lazy == 0 {
		return c.Pass
	}
	switch opt.Cache.Kind(k, steps) {
	case mar.StepLazy:
		return c.Lazy
	case mar.StepFull:
		return c.Full
	}
	return c.Pass
}
