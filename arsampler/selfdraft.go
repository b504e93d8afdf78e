package arsampler

import (
	"marspec/align"
	"marspec/diffusion"
	"marspec/mar"
)

// Self-drafting (Config.SelfDraft, `--draft self`): no draft network.
//
// A MAR target's pass over a context predicts a conditioning vector z for every masked
// position, not only for the next one in the order. Sampling several positions from one pass is
// MAR's own parallel decoding; here those samples are drafts, and verification restores the
// one-token-per-step law.
//
// The round of an image that has verified k tokens (order o, gamma drafts):
//   - drafts: d_j for position o[k+j], j < gamma, is the target head's sample from z(C*) at
//     that position, with the token's shared noise (its per-(image, position) x_T and epsilons);
//     C* is the context of the image's newest target pass whose tokens are all verified. No
//     transformer runs: one batched head run over every image's gamma positions.
//   - verification (prefix): target rows C_j = verified + d_0..d_{j-1}, j = 0..gamma, in one
//     batched pass; row j's head run at o[k+j] with the same shared noise gives the target's
//     last-step Gaussian p_j and its own draw; d_j is judged against it with its draft Gaussian
//     q_j (the last step of the head run from z(C*)); first rejection ends the round (residual
//     resample there), all accepted gives the bonus token from row gamma.
//   - the next C*: after a rejection at depth m the new verified context is C_m plus the
//     resampled token, and rows m+1.. contain the rejected draft, so row m is the newest pass
//     over verified tokens (one token stale); after a bonus token it is row gamma. So the
//     verification pass of a round supplies the next round's drafts: a round costs one batched
//     target pass of gamma+1 rows plus gamma extra head runs, and no draft network.
//   - an image's first round has no pass yet: it is a plain target step (as pre-filled tokens
//     are), whose pass then seeds the drafts; prefill 0 therefore still starts with one target
//     token.
//
// Why prefix + exact stays lossless. Speculative sampling is exact for any proposal q_j that is
// fixed by the past: the verified tokens, the accepted drafts before j, and randomness that the
// target's sampling of position o[k+j] never sees. Here q_j is a function of z(C*), and C* is a
// sub-context of the verified tokens chosen by the image's past accept/reject outcomes; nothing
// in it touches the noise of a position not yet settled (row m holds only accepted drafts, and a
// rejected round's later drafts are thrown away before anything depends on them, exactly as with
// a draft network). Given the shared noise of all but the last diffusion step, q_j and p_j are
// two Gaussians; accepting with min(1, p_j/q_j) and resampling norm((p_j - q_j)+) on rejection
// yields p_j exactly, and the shared noise has the same law as the target-only sampler's, so
// each token's law given its context is the target's. That q_j ignores d_0..d_{j-1} (all drafts
// of a round come from one pass) only lowers alpha at depth, where C* is j+1 tokens stale.
//
// Group verification works mechanically (one row, the verified context; C* is then that row,
// gamma tokens stale for the next round) but is as lossy as with a draft network.
//
// The lazy schedule (depth by depth, only images still accepting) gives the same images: the
// drafts are fixed by C* for the whole round, so drafting them per depth changes nothing, and
// row j is cached when it is computed. But it buys nothing: the point of self-drafting is that
// the gamma+1 contexts of a round share one sequential pass, and a lazy round needs one
// sequential pass per depth, i.e. about one per token, like the target alone, plus the draft
// head runs. Lazy self-drafting only reads fewer rows (about one per token). On hardware where
// rows cost (a CPU) self-drafting cannot pay either way; `--schedule auto` therefore picks
// batched for it.

// selfDraftPhase drafts every image's gamma tokens from its cached target pass in one head run.
// It reports the deepest draft (the draft "steps" of the round, for auto gamma's cost model).
func (e *Engine) selfDraftPhase() (int, error) {
	var imgs []*imageState
	var depths []int
	deepest := 0
	for _, st := range e.active {
		for j := 0; j < st.gamma; j++ {
			imgs, depths = append(imgs, st), append(depths, j)
		}
		deepest = max(deepest, st.gamma)
	}
	x0, runs, err := e.selfDraft(imgs, depths)
	if err != nil {
		return 0, err
	}
	for i, st := range imgs { // depths ascend within an image, so drafts land in order
		st.drafts = append(st.drafts, x0[i])
		st.draftRuns = append(st.draftRuns, runs[i])
	}
	return deepest, nil
}

// selfDraft samples draft j = depths[i] of image imgs[i] (position order[roundStart+j]) with the
// target's head from the image's cached z, with the draft noise of that token.
func (e *Engine) selfDraft(imgs []*imageState, depths []int) ([][]float64, []align.Run, error) {
	if len(imgs) == 0 {
		return nil, nil, nil
	}
	rows := make([]mar.DenoiseRow, len(imgs))
	for i, st := range imgs {
		idx := st.roundStart + depths[i]
		pos := st.order[idx]
		rows[i] = e.row(e.target, st.zSelf, st.zuSelf, 0, pos, idx, st.noise.Draft(st.job.Index, pos))
	}
	x0 := mar.Rows(len(rows), e.D)
	runs, err := e.runHead(e.denD, rows, x0)
	if err != nil {
		return nil, nil, err
	}
	e.Stats.DraftHeadRows += len(rows)
	return x0, runs, nil
}

// keepNewestPass caches, for every unfinished image of a batched round, the target row whose
// context is the newest one made only of verified tokens: row `accepted` under prefix
// verification (the row before the first rejected draft, or the bonus row), the image's only
// row otherwise.
func (e *Engine) keepNewestPass(items []targetItem, z, zu []float32) {
	eachImage(items, func(from, to int) {
		st := items[from].img
		if st.known == e.L {
			return
		}
		row := items[from].row
		if e.cfg.Verify == Prefix && st.gamma > 0 {
			row = items[from+st.accepted].row
		}
		e.keepZ(st, z, zu, row)
	})
}

// keepZ copies row `row` of a target pass (z, and zu under CFG) into st's self-draft cache.
func (e *Engine) keepZ(st *imageState, z, zu []float32, row int) {
	n := e.L * e.target.Manifest.Width
	st.zSelf = append(st.zSelf[:0], z[row*n:(row+1)*n]...)
	if zu != nil {
		st.zuSelf = append(st.zuSelf[:0], zu[row*n:(row+1)*n]...)
	}
}

// runHead runs a diffusion head over rows into x0 and pairs each row's trace with its noise.
func (e *Engine) runHead(den *mar.Denoiser, rows []mar.DenoiseRow, x0 [][]float64) ([]align.Run, error) {
	traces := make([]diffusion.Trace, len(rows))
	if err := den.Run(rows, x0, traces); err != nil {
		return nil, err
	}
	runs := make([]align.Run, len(rows))
	for i := range rows {
		runs[i] = align.Run{Trace: traces[i], Noise: rows[i].Noise}
	}
	return runs, nil
}
