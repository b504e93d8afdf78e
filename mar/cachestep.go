package mar

import (
	"fmt"
	"sort"
)

// ImageCache is one image's state across AR steps under CacheSettings: the K/V of its class
// half and, when lazy steps run it too, of its "no class" half; the CFG difference of the
// last full pass; and the tokens the previous step revealed (a lazy step's new encoder rows).
type ImageCache struct {
	halves  [2]*tokenCache
	diff    []float32 // [L*W]: z - z_uncond of the last full pass (ReuseCFG)
	prevNew []int     // token positions the previous step revealed
}

// CacheRow is one image in a conditioning call with the cache: its context, its step and the
// positions it predicts now (the only ones whose z a lazy step computes for sure).
type CacheRow struct {
	Cache        *ImageCache
	Tokens, Mask []float32 // [L*D], [L] (1 = unknown)
	Class        int
	Guided       bool
	Settings     CacheSettings
	Step         int
	NumSteps     int
	Predict      []int
}

// ConditionCached fills z and, for guided rows, zu ([rows, L, W], zu may be nil when no row is
// guided) at least at each row's Predict positions, running each row's step as its settings
// say (StepPlain, StepFull or StepLazy), with at most one call of each kind. It then records
// Predict as the row's newly revealed tokens for its next step.
func (m *Model) ConditionCached(rows []CacheRow, z, zu []float32) error {
	var plain, full, lazy []int
	for i, r := range rows {
		switch r.Settings.Kind(r.Step, r.NumSteps) {
		case StepPlain:
			plain = append(plain, i)
		case StepFull:
			full = append(full, i)
		default:
			lazy = append(lazy, i)
		}
	}
	if (len(full) > 0 || len(lazy) > 0) && m.Cached == nil {
		return fmt.Errorf("cache: model %s has no cached transformer (transformer_cached.onnx) loaded", m.Manifest.Name)
	}
	if err := m.conditionPlain(rows, plain, z, zu); err != nil {
		return err
	}
	if err := m.conditionFull(rows, full, z, zu); err != nil {
		return err
	}
	if err := m.conditionLazy(rows, lazy, z, zu); err != nil {
		return err
	}
	for _, r := range rows {
		r.Cache.prevNew = append(r.Cache.prevNew[:0], r.Predict...)
	}
	return nil
}

// conditionPlain runs transformer.onnx over the rows, exactly as without the cache.
func (m *Model) conditionPlain(rows []CacheRow, which []int, z, zu []float32) error {
	if len(which) == 0 {
		return nil
	}
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	ctx := NewContextBatch(len(which), L, D)
	guided := false
	for j, i := range which {
		copy(ctx.Tokens[j*L*D:], rows[i].Tokens)
		copy(ctx.Mask[j*L:], rows[i].Mask)
		ctx.ClassIDs[j] = int64(rows[i].Class)
		guided = guided || rows[i].Guided
	}
	pz := make([]float32, len(which)*L*W)
	var pzu []float32
	if guided {
		pzu = make([]float32, len(which)*L*W)
	}
	if err := ctx.Condition(m.Transformer, pz, pzu); err != nil {
		return err
	}
	for j, i := range which {
		copy(z[i*L*W:(i+1)*L*W], pz[j*L*W:])
		if rows[i].Guided {
			copy(zu[i*L*W:(i+1)*L*W], pzu[j*L*W:])
		}
	}
	return nil
}

// halvesOf are the halves a row's step runs (0 class, 1 "no class") and, per half, whether
// its K/V must be kept (a lazy step next reads them).
func halvesOf(r CacheRow, lazy bool) (halves []int, keep [2]bool) {
	reuse := r.Settings.ReuseCFG
	keep[0] = true
	if !r.Guided {
		return []int{0}, keep
	}
	keep[1] = !reuse
	if lazy && reuse {
		return []int{0}, keep
	}
	return []int{0, 1}, keep
}

func (c *ImageCache) half(t *CachedTransformer, h int) *tokenCache {
	if c.halves[h] == nil {
		c.halves[h] = t.newTokenCache()
	}
	return c.halves[h]
}

// conditionFull runs the cached graph as a full pass (every known token through the encoder,
// every position through the decoder) and fills the caches; guided rows that reuse the CFG
// difference record it.
func (m *Model) conditionFull(rows []CacheRow, which []int, z, zu []float32) error {
	if len(which) == 0 {
		return nil
	}
	t := m.Cached
	L, W, S, buf := t.L, t.W, t.S, t.buf
	all := make([]int, S)
	for p := range all {
		all[p] = p
	}
	var units []cacheUnit
	var owner [][2]int // row, half
	for _, i := range which {
		r := rows[i]
		encQ := make([]int, 0, S)
		for p := 0; p < S; p++ {
			if p < buf || r.Mask[p-buf] == 0 {
				encQ = append(encQ, p)
			}
		}
		halves, keep := halvesOf(r, false)
		for _, h := range halves {
			var c *tokenCache
			if keep[h] {
				c = r.Cache.half(t, h)
			}
			units = append(units, cacheUnit{cache: c, tokens: r.Tokens, mask: r.Mask, class: int64(r.Class),
				drop: float32(h), step: r.Step, encQ: encQ, decR: all, z: make([]float32, S*W)})
			owner = append(owner, [2]int{i, h})
		}
	}
	if err := t.run(units, true); err != nil {
		return err
	}
	for u, o := range owner {
		dst := z
		if o[1] == 1 {
			dst = zu
		}
		copy(dst[o[0]*L*W:(o[0]+1)*L*W], units[u].z[buf*W:])
	}
	for _, i := range which {
		r := rows[i]
		if !r.Guided || !r.Settings.ReuseCFG {
			continue
		}
		if r.Cache.diff == nil {
			r.Cache.diff = make([]float32, L*W)
		}
		for j := range r.Cache.diff {
			r.Cache.diff[j] = z[i*L*W+j] - zu[i*L*W+j]
		}
	}
	return nil
}

// conditionLazy runs the cached graph over the tokens revealed since the last step (encoder)
// and, in the decoder, those plus the tokens to predict and the Recompute stalest others.
func (m *Model) conditionLazy(rows []CacheRow, which []int, z, zu []float32) error {
	if len(which) == 0 {
		return nil
	}
	t := m.Cached
	L, W, buf := t.L, t.W, t.buf
	var units []cacheUnit
	var owner [][2]int
	for _, i := range which {
		r := rows[i]
		encQ := make([]int, len(r.Cache.prevNew))
		for j, p := range r.Cache.prevNew {
			encQ[j] = buf + p
		}
		halves, _ := halvesOf(r, true)
		for _, h := range halves {
			c := r.Cache.halves[h]
			if c == nil {
				return fmt.Errorf("cache: image half %d has no cache at lazy step %d (no full pass before it)", h, r.Step)
			}
			decR := append([]int(nil), encQ...)
			seen := map[int]bool{}
			for _, p := range decR {
				seen[p] = true
			}
			for _, p := range r.Predict {
				if !seen[buf+p] {
					decR = append(decR, buf+p)
					seen[buf+p] = true
				}
			}
			decR = append(decR, stalestPositions(c.fresh, seen, r.Settings.Recompute, buf)...)
			units = append(units, cacheUnit{cache: c, tokens: r.Tokens, mask: r.Mask, class: int64(r.Class),
				drop: float32(h), step: r.Step, encQ: encQ, decR: decR, z: make([]float32, len(decR)*W)})
			owner = append(owner, [2]int{i, h})
		}
	}
	if err := t.run(units, false); err != nil {
		return err
	}
	for u, o := range owner {
		dst := z
		if o[1] == 1 {
			dst = zu
		}
		for j, p := range units[u].decR {
			if p >= buf {
				copy(dst[(o[0]*L+p-buf)*W:(o[0]*L+p-buf+1)*W], units[u].z[j*W:(j+1)*W])
			}
		}
	}
	for _, i := range which {
		r := rows[i]
		if !r.Guided || !r.Settings.ReuseCFG {
			continue
		}
		for _, p := range r.Predict {
			at := (i*L + p) * W
			for j := 0; j < W; j++ {
				zu[at+j] = z[at+j] - r.Cache.diff[p*W+j]
			}
		}
	}
	return nil
}

// stalestPositions are the count token positions (over buffer + L, not the buffer, not in
// exclude) whose decoder K/V are oldest, ties by position: the extra tokens a lazy step
// recomputes, so that over lazy steps every position's K/V get renewed in turn.
func stalestPositions(fresh []int, exclude map[int]bool, count, buf int) []int {
	if count == 0 {
		return nil
	}
	cands := make([]int, 0, len(fresh)-buf)
	for p := buf; p < len(fresh); p++ {
		if !exclude[p] {
			cands = append(cands, p)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return fresh[cands[a]] < fresh[cands[b]] })
	return cands[:min(count, len(cands))]
}
