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

// Job is one image to generate. Index fixes the image's random streams (order, noise,
// acceptance draws) together with the seed, so results do not depend on batching.
type Job struct {
	Index int
	Class int
}

// Result is a finished image and its statistics.
type Result struct {
	Index, Class int
	Tokens       []float32
	Pixels       []uint8
	Stats        ImageStats
}

// Engine runs speculative decoding over a changing batch of images. Not safe for concurrent
// use: one goroutine calls Add and Round.
type Engine struct {
	target, draft *mar.Model
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
	order  []int
	known  int
	tokens []float32 // verified context [L*D]
	mask   []float32 // [L], 1 = unknown
	rng    *rand.Rand
	stats  ImageStats
	// this round
	gamma     int
	drafts    [][]float64
	draftRuns []align.Run
}

// NewEngine checks that draft and target fit together and prepares the samplers.
func NewEngine(target, draft *mar.Model, cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tm, dm := target.Manifest, draft.Manifest
	if tm.SeqLen() != dm.SeqLen() || tm.TokenDim != dm.TokenDim || len(tm.Classes) != len(dm.Classes) {
		return nil, fmt.Errorf("draft %s does not match target %s (tokens %d/%d, token dim %d/%d, classes %d/%d)",
			dm.Name, tm.Name, dm.SeqLen(), tm.SeqLen(), dm.TokenDim, tm.TokenDim, len(dm.Classes), len(tm.Classes))
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
	denD, err := draft.NewDenoiser(cfg.Sampling, true)
	if err != nil {
		return nil, err
	}
	return &Engine{target: target, draft: draft, cfg: cfg, L: L, D: tm.TokenDim, prefillN: n,
		noise: align.Noise{Seed: cfg.Sampling.Seed, Aligned: cfg.Align, Steps: cfg.Sampling.Steps, Dim: tm.TokenDim},
		denT:  denT, denD: denD, auto: newAutoGamma(cfg)}, nil
}

// Config is the engine's configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Add lets images join the batch; they take part from the next round on.
func (e *Engine) Add(jobs ...Job) error {
	for _, j := range jobs {
		if j.Class < 0 || j.Class >= len(e.target.Manifest.Classes) {
			return fmt.Errorf("class %d out of range (allowed: 0 to %d)", j.Class, len(e.target.Manifest.Classes)-1)
		}
	}
	for _, j := range jobs {
		st := &imageState{job: j, order: mar.OrderFor(e.cfg.Sampling.Seed, j.Index, e.L),
			tokens: make([]float32, e.L*e.D), mask: make([]float32, e.L),
			rng:   rand.New(rand.NewPCG(e.cfg.Sampling.Seed^0x3c6ef372fe94f82b, uint64(j.Index))),
			stats: newImageStats(e.L)}
		for i := range st.mask {
			st.mask[i] = 1
		}
		e.active = append(e.active, st)
	}
	return nil
}

// Active is the number of unfinished images.
func (e *Engine) Active() int { return len(e.active) }

// Round runs one speculative round for every active image and returns those that finished.
func (e *Engine) Round() ([]Result, error) {
	if len(e.active) == 0 {
		return nil, nil
	}
	gamma := e.auto.next(e.cfg)
	for _, st := range e.active {
		st.gamma = 0
		if st.known >= e.prefillN {
			st.gamma = min(gamma, e.L-st.known)
		}
		st.drafts, st.draftRuns = st.drafts[:0], st.draftRuns[:0]
	}
	if e.cfg.runsLazy() {
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
		done = append(done, Result{Index: st.job.Index, Class: st.job.Class, Tokens: st.tokens,
			Pixels: e.target.Tokenizer.Decode(st.tokens), Stats: st.stats})
	}
	e.active = keep
	return done, nil
}

// batchedRound drafts every image's gamma tokens, then runs one target pass over all contexts.
func (e *Engine) batchedRound() error {
	start := time.Now()
	draftSteps, err := e.draftPhase()
	if err != nil {
		return err
	}
	mid := time.Now()
	items, x0, runs, err := e.targetPhase()
	if err != nil {
		return err
	}
	end := time.Now()
	e.decide(items, x0, runs)
	e.Stats.DraftTime += mid.Sub(start)
	e.Stats.TargetTime += end.Sub(mid)
	e.Stats.OtherTime += time.Since(end)
	e.auto.observeCost(mid.Sub(start), draftSteps, end.Sub(mid))
	return nil
}

func (e *Engine) cfgScale(orderIndex int) float64 {
	return mar.CFGScale(e.cfg.Sampling, orderIndex+1, e.L)
}

func (e *Engine) guided() bool { return e.cfg.Sampling.CFG != 1 }

// condition runs a transformer over rows and returns z (and z for "no class" under CFG).
func (e *Engine) condition(m *mar.Model, ctx *mar.ContextBatch) ([]float32, []float32, error) {
	W := m.Manifest.Width
	z := make([]float32, ctx.Rows*e.L*W)
	var zu []float32
	if e.guided() {
		zu = make([]float32, ctx.Rows*e.L*W)
	}
	return z, zu, ctx.Condition(m.Transformer, z, zu)
}

func (e *Engine) row(m *mar.Model, z, zu []float32, row, pos, orderIndex int, noise *diffusion.TokenNoise) mar.DenoiseRow {
	W := m.Manifest.Width
	r := mar.DenoiseRow{Z: z[(row*e.L+pos)*W : (row*e.L+pos+1)*W], CFG: e.cfgScale(orderIndex), Noise: noise}
	if zu != nil {
		r.ZUncond = zu[(row*e.L+pos)*W : (row*e.L+pos+1)*W]
	}
	return r
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
		ctx := mar.NewContextBatch(len(imgs), e.L, e.D)
		for r, st := range imgs {
			if s == 0 {
				c := mar.NewContextBatch(1, e.L, e.D)
				copy(c.Tokens, st.tokens)
				copy(c.Mask, st.mask)
				ctxs[st] = c
			}
			copy(ctx.Tokens[r*e.L*e.D:], ctxs[st].Tokens)
			copy(ctx.Mask[r*e.L:], ctxs[st].Mask)
			ctx.ClassIDs[r] = int64(st.job.Class)
		}
		z, zu, err := e.condition(e.draft, ctx)
		if err != nil {
			return s, err
		}
		e.Stats.DraftForwards++
		e.Stats.DraftRows += len(imgs)
		rows := make([]mar.DenoiseRow, len(imgs))
		for r, st := range imgs {
			idx := st.known + s
			rows[r] = e.row(e.draft, z, zu, r, st.order[idx], idx, e.noise.Draft(st.job.Index, st.order[idx]))
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

// targetItem is one token the target samples this round: for image img, the j-th position of
// the round (order index known+j), conditioned on context row `row`.
type targetItem struct {
	img    *imageState
	j, row int
}

// targetPhase builds every image's target contexts, runs the target transformer once over all
// of them, and the target head for every position to verify or sample.
func (e *Engine) targetPhase() ([]targetItem, [][]float64, []align.Run, error) {
	var items []targetItem
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
	z, zu, err := e.condition(e.target, ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	e.Stats.TargetForwards++
	e.Stats.TargetRows += rows
	drows := make([]mar.DenoiseRow, len(items))
	for i, it := range items {
		idx := it.img.known + it.j
		pos := it.img.order[idx]
		drows[i] = e.row(e.target, z, zu, it.row, pos, idx, e.noise.Target(it.img.job.Index, pos))
	}
	x0 := mar.Rows(len(items), e.D)
	traces := make([]diffusion.Trace, len(items))
	if err := e.denT.Run(drows, x0, traces); err != nil {
		return nil, nil, nil, err
	}
	runs := make([]align.Run, len(items))
	for i := range items {
		runs[i] = align.Run{Trace: traces[i], Noise: drows[i].Noise}
	}
	return items, x0, runs, nil
}

// decide accepts, resamples or takes the target's tokens, image by image.
func (e *Engine) decide(items []targetItem, x0 [][]float64, runs []align.Run) {
	for start := 0; start < len(items); {
		st := items[start].img
		end := start
		for end < len(items) && items[end].img == st {
			end++
		}
		e.decideImage(st, items[start:end], x0[start:end], runs[start:end])
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
// position (targetX0 is the target's own sample there, for the distance statistic). An accepted
// draft is fixed; a rejected one is replaced by a draw from the modified distribution. It
// reports whether the draft was accepted.
func (e *Engine) judge(st *imageState, q, p align.Run, draft, targetX0 []float64) bool {
	logR, logSigma := align.LogRatio(e.cfg.Acceptance, q, p, draft)
	pos, step := st.order[st.known], st.known
	st.stats.Drafted++
	st.stats.SumSquaredDistance += align.SquaredDistance(draft, targetX0)
	st.stats.SumLogSigma += logSigma
	if math.Log(st.rng.Float64()) < logR {
		st.stats.Accepted++
		st.stats.AcceptedAtStep[step]++
		st.stats.AcceptedAtPos[pos]++
		e.auto.observeDraft(true)
		e.fix(st, draft)
		return true
	}
	e.auto.observeDraft(false)
	st.stats.RejectedAtStep[step]++
	st.stats.RejectedAtPos[pos]++
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

// Run generates all jobs, keeping at most maxBatch images in flight: finished images leave and
// waiting ones join between rounds. Results come back in job order.
func (e *Engine) Run(jobs []Job, maxBatch int) ([]Result, error) {
	if maxBatch < 1 {
		maxBatch = len(jobs)
	}
	results := make([]Result, 0, len(jobs))
	next := 0
	for next < len(jobs) || e.Active() > 0 {
		if free := maxBatch - e.Active(); free > 0 && next < len(jobs) {
			n := min(free, len(jobs)-next)
			if err := e.Add(jobs[next : next+n]...); err != nil {
				return nil, err
			}
			next += n
		}
		done, err := e.Round()
		if err != nil {
			return nil, err
		}
		results = append(results, done...)
	}
	order := map[int]int{}
	for i, j := range jobs {
		order[j.Index] = i
	}
	sorted := make([]Result, len(results))
	for _, r := range results {
		sorted[order[r.Index]] = r
	}
	return sorted, nil
}

// Generate runs speculative decoding for one image per class (image i gets index
// firstIndex+i) with at most maxBatch in flight, and summarises the run with its wall time.
func Generate(target, draft *mar.Model, cfg Config, classes []int, firstIndex, maxBatch int) ([]Result, Summary, error) {
	e, err := NewEngine(target, draft, cfg)
	if err != nil {
		return nil, Summary{}, err
	}
	jobs := make([]Job, len(classes))
	for i, c := range classes {
		jobs[i] = Job{Index: firstIndex + i, Class: c}
	}
	start := time.Now()
	res, err := e.Run(jobs, maxBatch)
	if err != nil {
		return nil, Summary{}, err
	}
	return res, Summarize(res, e.Stats, time.Since(start).Seconds()), nil
}
