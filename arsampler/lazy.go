package arsampler

import (
	"time"

	"marspec/align"
	"marspec/mar"
)

// lazyRound runs a prefix round depth by depth. At depth j every image still in the round has
// its verified context extended by its accepted drafts 0..j-1, which is exactly the context the
// batched schedule gives draft j and target row j; so the draft proposes token j from the image's
// current tokens, the target scores the same context, and the image leaves the round at its
// first rejection, after its bonus token, or after its one target token when gamma is 0.
func (e *Engine) lazyRound() error {
	open := append([]*imageState(nil), e.active...)
	var draftTime, targetTime time.Duration
	draftRows, targetRows := 0, 0
	for j := 0; len(open) > 0; j++ {
		var drafting []*imageState
		for _, st := range open {
			if j < st.gamma {
				drafting = append(drafting, st)
			}
		}
		start := time.Now()
		if len(drafting) > 0 {
			x0, runs, err := e.lazyDrafts(drafting, j)
			if err != nil {
				return err
			}
			for i, st := range drafting {
				st.drafts = append(st.drafts, x0[i])
				st.draftRuns = append(st.draftRuns, runs[i])
			}
			draftRows += len(drafting)
		}
		mid := time.Now()
		x0, runs, z, zu, err := e.nextToken(e.target, e.denT, open, false)
		if err != nil {
			return err
		}
		e.Stats.TargetForwards++
		e.Stats.TargetRows += len(open)
		targetRows += len(open)
		end := time.Now()
		still := open[:0]
		for i, st := range open {
			if e.decideDepth(st, j, x0[i], runs[i]) {
				still = append(still, st)
			} else if e.self && st.known < e.L {
				// row j (verified + the accepted drafts 0..j-1) is the image's last and newest
				// verified pass; kept only now, as the round's later drafts come from the old one
				e.keepZ(st, z, zu, i)
			}
		}
		open = still
		draftTime += mid.Sub(start)
		targetTime += end.Sub(mid)
		e.Stats.OtherTime += time.Since(end)
	}
	e.Stats.DraftTime += draftTime
	e.Stats.TargetTime += targetTime
	// the lazy cost model is per row: time per draft row against time per target row
	e.auto.observeCost(draftTime, draftRows, targetTime/time.Duration(max(targetRows, 1)))
	return nil
}

// decideDepth settles st's token at depth j of a lazy round and reports whether st goes on to
// depth j+1.
func (e *Engine) decideDepth(st *imageState, j int, targetX0 []float64, targetRun align.Run) bool {
	switch {
	case st.gamma == 0:
		if st.known < e.prefillN {
			st.stats.Prefilled++
		} else {
			st.stats.TargetOnly++
		}
		e.fix(st, targetX0)
		return false
	case j == st.gamma: // every draft accepted and a position left: the bonus token
		st.stats.Bonus++
		e.fix(st, targetX0)
		return false
	}
	if !e.judge(st, st.draftRuns[j], targetRun, st.drafts[j], targetX0) {
		return false
	}
	return j+1 < st.gamma || st.known < e.L
}

// lazyDrafts proposes draft j of each image: from the draft network over the image's current
// tokens (its verified ones plus drafts 0..j-1, all accepted), or, self-drafting, from the
// target pass cached at the start of the round (the same draft the batched schedule makes).
func (e *Engine) lazyDrafts(imgs []*imageState, j int) ([][]float64, []align.Run, error) {
	if e.self {
		depths := make([]int, len(imgs))
		for i := range depths {
			depths[i] = j
		}
		return e.selfDraft(imgs, depths)
	}
	x0, runs, _, _, err := e.nextToken(e.draft, e.denD, imgs, true)
	if err != nil {
		return nil, nil, err
	}
	e.Stats.DraftForwards++
	e.Stats.DraftRows += len(imgs)
	return x0, runs, nil
}

// nextToken samples, with model m, the next position of each image's order given its current
// tokens: one transformer pass over the images' contexts, then the diffusion head, with each
// token's draft or target noise. It also returns the pass's z (and zu under CFG).
func (e *Engine) nextToken(m *mar.Model, den *mar.Denoiser, imgs []*imageState, drafting bool) (
	x0 [][]float64, runs []align.Run, z, zu []float32, err error) {
	ctx := mar.NewContextBatch(len(imgs), e.L, e.D)
	for r, st := range imgs {
		copy(ctx.Tokens[r*e.L*e.D:], st.tokens)
		copy(ctx.Mask[r*e.L:], st.mask)
		ctx.ClassIDs[r] = int64(st.job.Class)
	}
	if z, zu, err = e.condition(m, ctx); err != nil {
		return
	}
	rows := make([]mar.DenoiseRow, len(imgs))
	for r, st := range imgs {
		pos := st.order[st.known]
		noise := st.noise.Target(st.job.Index, pos)
		if drafting {
			noise = st.noise.Draft(st.job.Index, pos)
		}
		rows[r] = e.row(m, z, zu, r, pos, st.known, noise)
	}
	x0 = mar.Rows(len(rows), e.D)
	if drafting {
		runs, err = e.runHead(den, rows, x0)
	} else {
		runs, err = e.targetHead(rows, x0)
	}
	return x0, runs, z, zu, err
}
