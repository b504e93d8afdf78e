package arsampler

import (
	"math"
	"time"

	"marspec/align"
	"marspec/mar"
)

// Early-exit self-drafting (Config.EarlyExit, `--draft exit`): the target's own first blocks
// plus a small trained exit draft the tokens (seed 003, SpecBound); the target pack carries the
// split graphs (mar.EarlyExit).
//
// The round of an image that has verified k tokens (order o):
//   - drafting, depth s = 0, 1, ...: one exit pass over C_s = verified + d_0..d_{s-1} gives the
//     exit's z at o[k+s] and the hidden state of C_s after the first blocks, which is kept. The
//     target head samples d_s from the exit's z with the token's draft noise, unless the exit
//     is unsure there (its predicted RMS z error above Config.ExitMaxError): then drafting
//     stops and the round's gamma is s. The pass over C_gamma is still made (its hidden state
//     is the bonus row), except when C_gamma would be the whole image.
//   - verification (prefix): the remaining blocks finish every kept hidden state in one
//     batched pass; row j gives the target's z at o[k+j], and the usual prefix test follows
//     (first rejection ends the round, all accepted gives the bonus token from row gamma).
//
// No block runs twice for a context: the first blocks ran in the draft pass, the rest in the
// verification pass, whose rows are exactly the drafted contexts. A round therefore costs
// gamma+1 sequential exit passes (first blocks + exit + a head run) and one batched pass of the
// remaining blocks.
//
// Why prefix + exact stays lossless: d_s is a function of C_s (the exit's z) and of draft noise
// the target's sampling of o[k+s] never sees, so it is a proposal fixed by the past, as a draft
// network's is; the stopping rule looks only at C_s too. Speculative sampling is exact for any
// such proposal and any stopping rule that depends on the past alone, and Rest gives the
// target's own z, so each token's law given its context is the target's.
//
// Only prefix verification with the batched schedule: group verification has no drafted
// contexts to continue, and a lazy round would cost one exit pass plus one Rest pass per depth,
// more than the target alone on every device.

// exitRound drafts every image's tokens with the exit, then verifies all kept contexts in one
// Rest pass.
func (e *Engine) exitRound() error {
	start := time.Now()
	steps, err := e.exitDraftPhase()
	if err != nil {
		return err
	}
	mid := time.Now()
	var items []targetItem
	var hidden, masks [][]float32
	for _, st := range e.active {
		for j := range st.exitHidden {
			items = append(items, targetItem{st, j, len(hidden)})
			hidden, masks = append(hidden, st.exitHidden[j]), append(masks, st.exitMask[j])
		}
		st.exitHidden, st.exitMask = st.exitHidden[:0], st.exitMask[:0]
	}
	z, zu, err := mar.FinishExit(e.target.Exit, hidden, masks, e.L, e.target.Manifest.Width, e.guided())
	if err != nil {
		return err
	}
	e.Stats.TargetForwards++
	e.Stats.TargetRows += len(hidden)
	x0, runs, err := e.targetTokens(items, z, zu, false)
	if err != nil {
		return err
	}
	end := time.Now()
	e.decide(items, x0, runs)
	e.account(start, mid, end, steps)
	return nil
}

// exitDraftPhase runs the exit passes of a round, depth by depth for the images still
// drafting, keeping each context's hidden state. It returns the number of sequential passes.
func (e *Engine) exitDraftPhase() (int, error) {
	W := e.target.Manifest.Width
	logMax := math.Inf(1)
	if e.cfg.ExitMaxError > 0 {
		logMax = 2 * math.Log(e.cfg.ExitMaxError) // the exit predicts log mean squared error
	}
	ctxs := map[*imageState]*mar.ContextBatch{}
	open := append([]*imageState(nil), e.active...)
	s := 0
	for ; len(open) > 0; s++ {
		ctx := e.draftContexts(open, ctxs)
		passStart := time.Now()
		pass, err := mar.RunExitDraft(e.target.Exit, ctx, W, e.guided())
		if err != nil {
			return s, err
		}
		e.Stats.ExitTime += time.Since(passStart)
		e.Stats.DraftForwards++
		e.Stats.DraftRows += len(open)
		var rows []mar.DenoiseRow
		var sampling []*imageState
		for r, st := range open {
			st.exitHidden = append(st.exitHidden, pass.HiddenRow(r))
			st.exitMask = append(st.exitMask, append([]float32(nil), ctxs[st].Mask...))
			st.stats.DraftCalls++
			if s == st.gamma {
				continue
			}
			idx := st.known + s
			pos := st.order[idx]
			if pass.Confidence(r, pos) > logMax {
				st.gamma = s
				st.stats.ExitStops++
				continue
			}
			z, zu := pass.Z(r, pos)
			rows = append(rows, mar.DenoiseRow{Z: z, ZUncond: zu, CFG: e.cfgScale(idx), Noise: st.noise.Draft(st.job.Index, pos)})
			sampling = append(sampling, st)
		}
		open = open[:0]
		if len(rows) == 0 {
			continue
		}
		x0 := mar.Rows(len(rows), e.D)
		runs, err := e.runHead(e.denD, rows, x0)
		if err != nil {
			return s, err
		}
		e.Stats.DraftHeadRows += len(rows)
		for i, st := range sampling {
			st.drafts = append(st.drafts, x0[i])
			st.draftRuns = append(st.draftRuns, runs[i])
			ctxs[st].Set(0, st.order[st.known+s], x0[i])
			// the next depth is the next draft, or the bonus row unless the drafts end the image
			if s+1 < st.gamma || st.known+s+1 < e.L {
				open = append(open, st)
			}
		}
	}
	return s, nil
}

// targetTokens runs the target's head at each item's position from a target pass's z (and zu
// under CFG), with each token's target noise: z holds the pass's whole rows, or, picked, item
// i's position at i (conditionPicked).
func (e *Engine) targetTokens(items []targetItem, z, zu []float32, picked bool) ([][]float64, []align.Run, error) {
	rows := make([]mar.DenoiseRow, len(items))
	for i, it := range items {
		idx := it.img.known + it.j
		pos := it.img.order[idx]
		noise := it.img.noise.Target(it.img.job.Index, pos)
		if picked {
			rows[i] = e.pickedRow(e.target, z, zu, i, idx, noise)
		} else {
			rows[i] = e.row(e.target, z, zu, it.row, pos, idx, noise)
		}
	}
	x0 := mar.Rows(len(items), e.D)
	runs, err := e.targetHead(rows, x0)
	return x0, runs, err
}
