package arsampler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"marspec/align"
	"marspec/diffusion"
	"marspec/mar"
	"marspec/prefill"
)

// Engine runs speculative decoding over a changing batch of images. Not safe for concurrent
// use: one goroutine calls Add and Round.
type Engine struct {
	target, draft *mar.Model // draft is nil when self-drafting
	self          bool       // cfg.SelfDraft: drafts from the target's newest pass (selfdraft.go)
	exit          bool       // cfg.EarlyExit: drafts from the target's first blocks (earlyexit.go)
	cfg           Config
	L, D          int
	prefillN      int
	noise         align.Noise
	denT, denD    *mar.Denoiser
	active        []*imageState
	Stats         EngineStats
	auto          autoGamma
}

type imageState struct {
	job    Job
	seed   uint64      // the job's seed, or the configuration's
	noise  align.Noise // keyed by seed
	slot   int         // position in Run's job list
	order  []int
	known  int
	tokens []float32 // verified context [L*D]
	mask   []float32 // [L], 1 = unknown
	rng    *rand.Rand
	stats  ImageStats
	// this round
	gamma      int
	roundStart int // known tokens when the round began; draft j is order[roundStart+j]
	accepted   int // drafts accepted this round
	drafts     [][]float64
	draftRuns  []align.Run
	// self-drafting: z (and z for "no class" under CFG) of the target's newest pass over a context
	// the image has verified, for every position; nil until the image's first target pass
	zSelf, zuSelf []float32
	// early-exit drafting: this round's contexts (hidden state after the first blocks, mask)
	exitHidden, exitMask [][]float32
}

// NewEngine checks that draft and target fit together and prepares the samplers. With
// cfg.SelfDraft, or a nil draft (which sets it), the target drafts for itself and draft is not
// used.
func NewEngine(target, draft *mar.Model, cfg Config) (*Engine, error) {
	if draft == nil {
		cfg.SelfDraft = true
	}
	if cfg.EarlyExit {
		cfg.SelfDraft = false
	}
	if cfg.SelfDraft || cfg.EarlyExit {
		draft = nil
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tm := target.Manifest
	if cfg.EarlyExit && target.Exit == nil {
		return nil, fmt.Errorf("draft exit: target pack %s has no early_exit graphs (scripts/train/early_exit.py adds them; the embedded target has them)", tm.Name)
	}
	if draft != nil {
		dm := draft.Manifest
		if tm.SeqLen() != dm.SeqLen() || tm.TokenDim != dm.TokenDim || len(tm.Classes) != len(dm.Classes) {
			return nil, fmt.Errorf("draft %s does not match target %s (tokens %d/%d, token dim %d/%d, classes %d/%d)",
				dm.Name, tm.Name, dm.SeqLen(), tm.SeqLen(), dm.TokenDim, tm.TokenDim, len(dm.Classes), len(tm.Classes))
		}
	}
	cfg.Sampling.NumIter = 0
	cfg.Sampling.FinalStepNoise = true
	if err := target.Validate(&cfg.Sampling); err != nil {
		return nil, err
	}
	L := tm.SeqLen()
	n, err := prefill.Count(cfg.Prefill, L)
	if err != nil {
		return nil, err
	}
	denT, err := target.NewDenoiser(cfg.Sampling, true)
	if err != nil {
		return nil, err
	}
	denD := denT // self-drafting samples drafts with the target's own head
	if draft != nil {
		if denD, err = draft.NewDenoiser(cfg.Sampling, true); err != nil {
			return nil, err
		}
	}
	e := &Engine{target: target, draft: draft, self: cfg.SelfDraft, exit: cfg.EarlyExit, cfg: cfg, L: L, D: tm.TokenDim, prefillN: n,
		noise: align.Noise{Seed: cfg.Sampling.Seed, Aligned: cfg.Align, Steps: cfg.Sampling.Steps, Dim: tm.TokenDim},
		denT:  denT, denD: denD, auto: newAutoGamma(cfg)}
	if x := tm.EarlyExit; cfg.EarlyExit && x != nil {
		e.Stats.ExitRestShare = float64(x.Blocks-x.Depth) / float64(x.Blocks)
	}
	return e, nil
}

// Config is the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Round runs one speculative round for every active image and returns those that finished.
func (e *Engine) Round() ([]Result, error) {
	if len(e.active) == 0 {
		return nil, nil
	}
	gamma := e.auto.next(e.cfg)
	for _, st := range e.active {
		st.gamma, st.roundStart, st.accepted = 0, st.known, 0
		// a self-drafting image needs one target pass of its own before it can draft
		if st.known >= e.prefillN && (!e.self || st.zSelf != nil) {
			st.gamma = min(gamma, e.L-st.known)
		}
		switch {
		case st.gamma == 0:
		case e.exit: // counted per exit pass: drafting may stop early (earlyexit.go)
		case e.self: // one batched head run drafts the whole round
			st.stats.DraftCalls++
		default: // gamma draft AR steps
			st.stats.DraftCalls += st.gamma
		}
		st.drafts, st.draftRuns = st.drafts[:0], st.draftRuns[:0]
	}
	if e.exit {
		if err := e.exitRound(); err != nil {
			return nil, err
		}
	} else if e.cfg.runsLazy() {
		if err := e.lazyRound(); err != nil {
			return nil, err
		}
	} else if err := e.batchedRound(); err != nil {
		return nil, err
	}
	e.Stats.Rounds++
	e.Stats.GammaSum += gamma

	var done []Result
	keep := e.active[:0]
	for _, st := range e.active {
		st.stats.Rounds++
		if st.known < e.L {
			keep = append(keep, st)
			continue
		}
		done = append(done, Result{Index: st.job.Index, Class: st.job.Class, Seed: st.seed, Request: st.job.Request,
			Tokens: st.tokens, Pixels: e.target.Tokenizer.Decode(st.tokens), Stats: st.stats, slot: st.slot})
	}
	e.active = keep
	return done, nil
}

// batchedRound drafts every image's gamma tokens, then runs one target pass over all contexts.
func (e *Engine) batchedRound() error {
	start := time.Now()
	draftPhase := e.draftPhase
	if e.self {
		draftPhase = e.selfDraftPhase
	}
	draftSteps, err := draftPhase()
	if err != nil {
		return err
	}
	mid := time.Now()
	items, x0, runs, z, zu, err := e.targetPhase()
	if err != nil {
		return err
	}
	end := time.Now()
	e.decide(items, x0, runs)
	if e.self {
		e.keepNewestPass(items, z, zu)
	}
	e.account(start, mid, end, draftSteps)
	return nil
}

// account books a batched round's times (drafting from start to mid, the target's pass and head
// to end, deciding since) and feeds auto gamma's cost model with the round's draft steps.
func (e *Engine) account(start, mid, end time.Time, draftSteps int) {
	e.Stats.DraftTime += mid.Sub(start)
	e.Stats.TargetTime += end.Sub(mid)
	e.Stats.OtherTime += time.Since(end)
	e.auto.observeCost(mid.Sub(start), draftSteps, end.Sub(mid))
}

func (e *Engine) cfgScale(orderIndex int) float64 {
	return mar.CFGScale(e.cfg.Sampling, orderIndex+1, e.L)
}

func (e *Engine) guided() bool { return e.cfg.Sampling.CFG != 1 }

// condition runs a transformer over rows and returns z (and z for "no class" under CFG).
func (e *Engine) condition(m *mar.Model, ctx *mar.ContextBatch) ([]float32, []float32, error) {
	z, zu := e.zBuffers(m, ctx.Rows*e.L)
	return z, zu, ctx.Condition(m.Transformer, z, zu)
}

// conditionPicked runs a transformer over rows and returns z (and z for "no class" under CFG)
// at the (row, position) pairs at only, [len(at), W] each (mar.ContextBatch.ConditionPicked).
func (e *Engine) conditionPicked(m *mar.Model, ctx *mar.ContextBatch, at [][2]int) ([]float32, []float32, error) {
	z, zu := e.zBuffers(m, len(at))
	return z, zu, ctx.ConditionPicked(m.Transformer, at, z, zu)
}

// zBuffers are n conditioning vectors of m's width, and as many for "no class" under CFG.
func (e *Engine) zBuffers(m *mar.Model, n int) (z, zu []float32) {
	z = make([]float32, n*m.Manifest.Width)
	if e.guided() {
		zu = make([]float32, n*m.Manifest.Width)
	}
	return z, zu
}

// pickedRow is the head row of conditioning vector j of z (and zu): pick j of a
// conditionPicked pass.
func (e *Engine) pickedRow(m *mar.Model, z, zu []float32, j, orderIndex int, noise *diffusion.TokenNoise) mar.DenoiseRow {
	W := m.Manifest.Width
	r := mar.DenoiseRow{Z: z[j*W : (j+1)*W], CFG: e.cfgScale(orderIndex), Noise: noise}
	if zu != nil {
		r.ZUncond = zu[j*W : (j+1)*W]
	}
	return r
}

// row is the head row of position pos of context row `row` of a whole pass (condition).
func (e *Engine) row(m *mar.Model, z, zu []float32, row, pos, orderIndex int, noise *diffusion.TokenNoise) mar.DenoiseRow {
	return e.pickedRow(m, z, zu, row*e.L+pos, orderIndex, noise)
}

// draftPhase lets the draft propose each image's gamma tokens, one AR step at a time, all
// images batched. It returns the number of draft AR steps run.
func (e *Engine) draftPhase() (int, error) {
	maxGamma := 0
	for _, st := range e.active {
		maxGamma = max(maxGamma, st.gamma)
	}
	ctxs := map[*imageState]*mar.ContextBatch{}
	for s := 0; s < maxGamma; s++ {
		var imgs []*imageState
		for _, st := range e.active {
			if s < st.gamma {
				imgs = append(imgs, st)
			}
		}
		ctx := e.draftContexts(imgs, ctxs)
		at := make([][2]int, len(imgs))
		for r, st := range imgs {
			at[r] = [2]int{r, st.order[st.known+s]}
		}
		z, zu, err := e.conditionPicked(e.draft, ctx, at)
		if err != nil {
			return s, err
		}
		e.Stats.DraftForwards++
		e.Stats.DraftRows += len(imgs)
		rows := make([]mar.DenoiseRow, len(imgs))
		for r, st := range imgs {
			idx := st.known + s
			rows[r] = e.pickedRow(e.draft, z, zu, r, idx, st.noise.Draft(st.job.Index, st.order[idx]))
		}
		x0 := mar.Rows(len(rows), e.D)
		traces := make([]diffusion.Trace, len(rows))
		if err := e.denD.Run(rows, x0, traces); err != nil {
			return s, err
		}
		for r, st := range imgs {
			st.drafts = append(st.drafts, x0[r])
			st.draftRuns = append(st.draftRuns, align.Run{Trace: traces[r], Noise: rows[r].Noise})
			ctxs[st].Set(0, st.order[st.known+s], x0[r])
		}
	}
	return maxGamma, nil
}

// draftContexts batches the images' current drafting contexts (verified tokens plus this
// round's drafts so far), kept one row per image in ctxs and started from the verified tokens on
// an image's first depth.
func (e *Engine) draftContexts(imgs []*imageState, ctxs map[*imageState]*mar.ContextBatch) *mar.ContextBatch {
	ctx := mar.NewContextBatch(len(imgs), e.L, e.D)
	for r, st := range imgs {
		c, ok := ctxs[st]
		if !ok {
			c = mar.NewContextBatch(1, e.L, e.D)
			copy(c.Tokens, st.tokens)
			copy(c.Mask, st.mask)
			ctxs[st] = c
		}
		copy(ctx.Tokens[r*e.L*e.D:], c.Tokens)
		copy(ctx.Mask[r*e.L:], c.Mask)
		ctx.ClassIDs[r] = int64(st.job.Class)
	}
	return ctx
}

// targetItem is one token the target samples this round: for image img, the j-th position of
// the round (order index known+j), conditioned on context row `row`.
type targetItem struct {
	img    *imageState
	j, row int
}

// targetPhase builds every image's target contexts, runs the target transformer once over all
// of them, and the target head for every position to verify or sample. The pass's whole z (and
// zu) comes back only when self-drafting, which keeps rows of it; otherwise the pass hands back
// the items' positions alone (conditionPicked) and z, zu are nil.
func (e *Engine) targetPhase() (items []targetItem, x0 [][]float64, runs []align.Run, z, zu []float32, err error) {
	rows := 0
	for _, st := range e.active {
		switch {
		case st.gamma == 0:
			items = append(items, targetItem{st, 0, rows})
			rows++
		case e.cfg.Verify == Group:
			for j := 0; j < st.gamma; j++ {
				items = append(items, targetItem{st, j, rows})
			}
			rows++
		default: // prefix: contexts verified+drafts[:j] for j = 0..gamma (the last for the bonus)
			n := st.gamma + 1
			if st.known+st.gamma >= e.L {
				n = st.gamma
			}
			for j := 0; j < n; j++ {
				items = append(items, targetItem{st, j, rows})
				rows++
			}
		}
	}
	ctx := mar.NewContextBatch(rows, e.L, e.D)
	for _, it := range items {
		st := it.img
		ctx.ClassIDs[it.row] = int64(st.job.Class)
		copy(ctx.Tokens[it.row*e.L*e.D:(it.row+1)*e.L*e.D], st.tokens)
		copy(ctx.Mask[it.row*e.L:(it.row+1)*e.L], st.mask)
		if e.cfg.Verify == Prefix {
			for k := 0; k < it.j && k < len(st.drafts); k++ {
				ctx.Set(it.row, st.order[st.known+k], st.drafts[k])
			}
		}
	}
	e.Stats.TargetForwards++
	e.Stats.TargetRows += rows
	if e.self { // keepNewestPass keeps whole rows of this pass for the next round's drafts
		if z, zu, err = e.condition(e.target, ctx); err != nil {
			return
		}
		x0, runs, err = e.targetTokens(items, z, zu, false)
		return items, x0, runs, z, zu, err
	}
	at := make([][2]int, len(items))
	for i, it := range items {
		at[i] = [2]int{it.row, it.img.order[it.img.known+it.j]}
	}
	if z, zu, err = e.conditionPicked(e.target, ctx, at); err != nil {
		return
	}
	x0, runs, err = e.targetTokens(items, z, zu, true)
	return items, x0, runs, nil, nil, err
}

// targetHead runs the target's diffusion head over rows into x0, timing it apart from the
// transformer (the cost ratio c of the GPU prediction needs both parts).
func (e *Engine) targetHead(rows []mar.DenoiseRow, x0 [][]float64) ([]align.Run, error) {
	start := time.Now()
	runs, err := e.runHead(e.denT, rows, x0)
	e.Stats.TargetHeadTime += time.Since(start)
	e.Stats.TargetTokens += len(rows)
	return runs, err
}

// decide accepts, resamples or takes the target's tokens, image by image.
func (e *Engine) decide(items []targetItem, x0 [][]float64, runs []align.Run) {
	eachImage(items, func(from, to int) {
		e.decideImage(items[from].img, items[from:to], x0[from:to], runs[from:to])
	})
}

// eachImage calls f with the range of items of each image (an image's items are adjacent).
func eachImage(items []targetItem, f func(from, to int)) {
	for start := 0; start < len(items); {
		end := start
		for end < len(items) && items[end].img == items[start].img {
			end++
		}
		f(start, end)
		start = end
	}
}

func (e *Engine) decideImage(st *imageState, items []targetItem, x0 [][]float64, runs []align.Run) {
	if st.gamma == 0 {
		if st.known < e.prefillN {
			st.stats.Prefilled++
		} else {
			st.stats.TargetOnly++
		}
		e.fix(st, x0[0])
		return
	}
	allAccepted := true
	for j := 0; j < st.gamma; j++ {
		if !e.judge(st, st.draftRuns[j], runs[j], st.drafts[j], x0[j]) {
			allAccepted = false
			if e.cfg.Verify == Prefix {
				return
			}
		}
	}
	if allAccepted && e.cfg.Verify == Prefix && len(items) > st.gamma {
		st.stats.Bonus++
		e.fix(st, x0[st.gamma])
	}
}

// judge tests the draft token for st's next position against the target's run for the same
// position (targetX0 is the target's own sample there). An accepted draft is fixed; a rejected
// one is replaced by a draw from the modified distribution, or by targetX0 under
// Rejection=Target. It reports whether the draft was accepted.
func (e *Engine) judge(st *imageState, q, p align.Run, draft, targetX0 []float64) bool {
	logR, logSigma := align.LogRatio(e.cfg.Acceptance, q, p, draft)
	pos, step := st.order[st.known], st.known
	st.stats.Drafted++
	st.stats.SumSquaredDistance += align.SquaredDistance(draft, targetX0)
	st.stats.SumLogSigma += logSigma
	st.stats.SumAcceptProb += acceptProb(logR + e.cfg.Tolerance)
	if lambda := e.cfg.Tolerance; lambda > 0 {
		st.stats.SumToleranceGain += acceptProb(logR+lambda) - acceptProb(logR)
	}
	if math.Log(st.rng.Float64()) < logR+e.cfg.Tolerance {
		st.stats.Accepted++
		st.stats.AcceptedAtStep[step]++
		st.stats.AcceptedAtPos[pos]++
		st.accepted++
		e.auto.observeDraft(true)
		e.fix(st, draft)
		return true
	}
	e.auto.observeDraft(false)
	st.stats.RejectedAtStep[step]++
	st.stats.RejectedAtPos[pos]++
	if e.cfg.Rejection == Target {
		st.stats.Fallbacks++
		e.fix(st, targetX0)
		return false
	}
	res := ResampleModified(st.rng, p.Trace.LastMean, p.Trace.LastLogVar, q.Trace.LastMean, q.Trace.LastLogVar,
		logSigma, e.cfg.MaxResampleTries)
	st.stats.Resampled++
	st.stats.Tries += res.Tries
	if res.BoundHit {
		st.stats.BoundHits++
	}
	e.fix(st, res.X)
	return false
}

// fix makes the next token of st's order known with value x.
func (e *Engine) fix(st *imageState, x []float64) {
	pos := st.order[st.known]
	for i := 0; i < e.D; i++ {
		st.tokens[pos*e.D+i] = float32(x[i])
	}
	st.mask[pos] = 0
	st.known++
}
