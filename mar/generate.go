package mar

import (
	"fmt"
	"math"
	"strconv"

	"marspec/diffusion"
)

// Model is a loaded model pack ready to sample: transformer, diffusion head and schedule.
type Model struct {
	Manifest    *Manifest
	Transformer Transformer
	Head        Head
	Tokenizer   Tokenizer
	// Exit is the target's early-exit draft (the pack's early_exit graphs); nil when it has none
	Exit EarlyExit
	// Distilled is the pack's few-step student head (distilled_head); nil when it has none
	Distilled DistilledHead
	// Cached is the pack's cached transformer (caching across AR steps); nil when it has none
	// or it was read at a precision other than fp32
	Cached *CachedTransformer
}

// Options are the sampling settings of one generation request.
type Options struct {
	Seed        uint64
	CFG         float64 // 1 = no guidance
	CFGSchedule string  // "linear" (MAR's) or "constant"
	Temperature float64
	NumIter     int // AR steps; 0 or L = one token per step (the paper's setting)
	Steps       int // diffusion sampling steps; 0 = the manifest's
	// StepsLate anneals the diffusion steps over generation (as DiSA does): the first AR step
	// uses Steps, the last StepsLate, linear in between. Late tokens have narrow conditionals
	// (most of the image is known), so they need fewer steps. 0 = no annealing.
	StepsLate  int
	Batch      int // images per transformer batch; 0 = all
	FirstIndex int // index of the request's first image (an image's randomness depends on its index)
	// FinalStepNoise gives the last diffusion step its variance (MAR adds none). Speculative
	// decoding needs a Gaussian last step; a target-only baseline compared with it must match.
	FinalStepNoise bool
	// Sampler is the head's reverse process ("" = ddpm, MAR's); Eta is DDIM's noise fraction.
	Sampler diffusion.Sampler
	Eta     float64
	// Cache reuses work across AR steps (docs/cache.md); off by default
	Cache CacheSettings
}

// guided reports whether validated options sample with classifier-free guidance.
func (o Options) guided() bool { return o.CFG != 1 }

// condHalves is how many conditionings each row carries: the class's, and under guidance the "no
// class" one beside it.
func condHalves(guided bool) int {
	if guided {
		return 2
	}
	return 1
}

// Image is one generated image.
type Image struct {
	Index  int // position in the request; with Seed it fixes the image
	Class  int
	Tokens []float32 // [L*D]
	Pixels []uint8   // [C][H][W]
}

// Validate checks options against the model and fills defaults.
func (m *Model) Validate(opt *Options) error {
	L := m.Manifest.SeqLen()
	if opt.CFG == 0 {
		opt.CFG = 1
	}
	if !(opt.CFG >= 1 && opt.CFG <= 50) { // written so that NaN fails too
		return fmt.Errorf("cfg %g out of range (allowed: 1 to 50; 1 = no guidance)", opt.CFG)
	}
	switch opt.CFGSchedule {
	case "":
		opt.CFGSchedule = "linear"
	case "linear", "constant":
	default:
		return fmt.Errorf("cfg schedule %q unknown (allowed: linear, constant)", opt.CFGSchedule)
	}
	if opt.Temperature == 0 {
		opt.Temperature = 1
	}
	sampler, err := diffusion.ParseSampler(string(opt.Sampler))
	if err != nil {
		return err
	}
	opt.Sampler = sampler
	if !(opt.Eta >= 0 && opt.Eta <= 1) || (opt.Eta != 0 && !sampler.HasEta()) {
		return fmt.Errorf("eta %g with sampler %s out of range (allowed: 0 to 1, with ddim only)", opt.Eta, sampler)
	}
	if !(opt.Temperature >= 0.05 && opt.Temperature <= 5) {
		return fmt.Errorf("temperature %g out of range (allowed: 0.05 to 5)", opt.Temperature)
	}
	if opt.NumIter == 0 {
		opt.NumIter = L
	}
	if opt.NumIter < 1 || opt.NumIter > L {
		return fmt.Errorf("num-iter %d out of range (allowed: 1 to %d)", opt.NumIter, L)
	}
	tsteps := m.Manifest.Diffusion.TrainingSteps
	if opt.Steps == 0 {
		opt.Steps = m.Manifest.Diffusion.SamplingSteps
	}
	if opt.Steps < 1 || opt.Steps > tsteps {
		return fmt.Errorf("steps %d out of range (allowed: 1 to %d)", opt.Steps, tsteps)
	}
	if opt.StepsLate < 0 || opt.StepsLate > opt.Steps {
		return fmt.Errorf("steps-late %d out of range (allowed: 0 = no annealing, or 1 to steps = %d)", opt.StepsLate, opt.Steps)
	}
	if opt.Batch < 0 {
		return fmt.Errorf("batch %d must be positive", opt.Batch)
	}
	if e := CheckDistilled(m.Manifest, *opt); e != nil {
		return e
	}
	if err := opt.Cache.Validate(L); err != nil {
		return err
	}
	if opt.Cache.On && m.Cached == nil {
		return fmt.Errorf("cache: model %s has no cached transformer (transformer_cached.onnx from scripts/packs/cached_transformer.py; fp32 only)", m.Manifest.Name)
	}
	if opt.Sampler == diffusion.Distilled && m.Distilled == nil {
		return fmt.Errorf("sampler distilled: model %s has no distilled head loaded", m.Manifest.Name)
	}
	return nil
}

// CheckClasses rejects class ids outside the pack.
func (m *Model) CheckClasses(classes []int) error {
	for _, c := range classes {
		if c < 0 || c >= len(m.Manifest.Classes) {
			return fmt.Errorf("class %d out of range (allowed: 0 to %d)", c, len(m.Manifest.Classes)-1)
		}
	}
	return nil
}

// NewDenoiser builds the reverse-diffusion runner for these options.
func (m *Model) NewDenoiser(opt Options, finalStepNoise bool) (*Denoiser, error) {
	d := m.Manifest.Diffusion
	s, err := diffusion.NewSchedule(d.Schedule, d.TrainingSteps, opt.Steps)
	if err != nil {
		return nil, err
	}
	den := &Denoiser{Head: m.Head, Schedule: s, Options: diffusion.StepOptions{
		ClipX0: d.ClipX0, Temperature: opt.Temperature, FinalStepNoise: finalStepNoise},
		Sampler: opt.Sampler, Eta: opt.Eta}
	if opt.Sampler == diffusion.Distilled {
		if den.distilled, err = m.newDistilledSampler(opt.Steps); err != nil {
			return nil, err
		}
	}
	return den, nil
}

// newDistilledSampler prepares the distilled head's K-step run (K = steps, one of the trained
// counts: Validate checked it).
func (m *Model) newDistilledSampler(steps int) (*distilledSampler, error) {
	spec := m.Manifest.DistilledHead
	if spec == nil || m.Distilled == nil {
		return nil, fmt.Errorf("sampler distilled: model %s has no distilled head loaded", m.Manifest.Name)
	}
	times, ok := spec.Times[strconv.Itoa(steps)]
	if !ok {
		return nil, fmt.Errorf("steps %d: the distilled head was trained for %s", steps, spec.StepsText())
	}
	T := m.Manifest.Diffusion.TrainingSteps
	full, err := diffusion.NewSchedule(m.Manifest.Diffusion.Schedule, T, T)
	if err != nil {
		return nil, err
	}
	return &distilledSampler{head: m.Distilled, times: times, training: full}, nil
}

// CFGScale is the guidance scale of a step after which `known` of L tokens are known.
func CFGScale(opt Options, known, seqLen int) float64 {
	if opt.CFGSchedule == "constant" {
		return opt.CFG
	}
	return diffusion.LinearCFGScale(opt.CFG, known, seqLen)
}

// StepsAt is the number of diffusion steps of AR step k of numIter under opt's annealing.
func StepsAt(opt Options, k, numIter int) int {
	if opt.StepsLate == 0 || opt.StepsLate == opt.Steps || numIter < 2 {
		return opt.Steps
	}
	frac := float64(k) / float64(numIter-1)
	return int(math.Round(float64(opt.Steps) + frac*float64(opt.StepsLate-opt.Steps)))
}

// Generate samples one image per entry of classes with the model alone (no speculation).
// Image i depends only on (opt, i, classes[i]): the batch size does not change it.
func (m *Model) Generate(classes []int, opt Options) ([]Image, error) {
	return m.GenerateWatched(classes, opt, nil)
}

// StepDone is how far a batch of Generate is after one of its AR steps.
type StepDone struct {
	Step, Steps int // AR steps done, and in all, of this batch
	Images      int // images in the batch
	Known       int // tokens known of each image of the batch
}

// GenerateWatched is Generate that tells onStep (when not nil) after each AR step of each
// batch how far it is: progress inside an image for the cost of one call per step.
func (m *Model) GenerateWatched(classes []int, opt Options, onStep func(StepDone)) ([]Image, error) {
	if err := m.Validate(&opt); err != nil {
		return nil, err
	}
	if err := m.CheckClasses(classes); err != nil {
		return nil, err
	}
	dens := denoisers{model: m, opt: opt}
	batch := opt.Batch
	if batch == 0 || batch > len(classes) {
		batch = len(classes)
	}
	images := make([]Image, 0, len(classes))
	for start := 0; start < len(classes); start += batch {
		end := min(start+batch, len(classes))
		got, err := m.generateBatch(classes[start:end], opt.FirstIndex+start, opt, &dens, onStep)
		if err != nil {
			return nil, err
		}
		images = append(images, got...)
	}
	return images, nil
}

// denoisers holds one Denoiser per step count, built on first use (annealing needs several).
type denoisers struct {
	model   *Model
	opt     Options
	bySteps map[int]*Denoiser
}

func (d *denoisers) get(steps int) (*Denoiser, error) {
	if den, ok := d.bySteps[steps]; ok {
		return den, nil
	}
	opt := d.opt
	opt.Steps = steps
	den, err := d.model.NewDenoiser(opt, opt.FinalStepNoise)
	if err != nil {
		return nil, err
	}
	if d.bySteps == nil {
		d.bySteps = map[int]*Denoiser{}
	}
	d.bySteps[steps] = den
	return den, nil
}

func (m *Model) generateBatch(classes []int, first int, opt Options, dens *denoisers, onStep func(StepDone)) ([]Image, error) {
	b := len(classes)
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	guided := opt.guided()
	ctx := NewContextBatch(b, L, D)
	orders := make([][]int, b)
	for i := range classes {
		orders[i] = OrderFor(opt.Seed, first+i, L)
		ctx.ClassIDs[i] = int64(classes[i])
	}
	known := 0
	sizes := StepSizes(L, opt.NumIter)
	var caches []ImageCache
	if opt.Cache.On {
		caches = make([]ImageCache, b)
		defer func() {
			for i := range caches {
				caches[i].Release()
			}
		}()
	}
	var z, zu []float32 // the picked positions' conditioning, [b*size, W] each
	for k, size := range sizes {
		where := make([][2]int, 0, b*size)
		for i := 0; i < b; i++ {
			for _, pos := range orders[i][known : known+size] {
				where = append(where, [2]int{i, pos})
			}
		}
		z = grow(z, len(where)*W)
		if guided {
			zu = grow(zu, len(where)*W)
		}
		if err := m.condition(ctx, caches, orders, where, known, size, k, len(sizes), opt, z, zu); err != nil {
			return nil, err
		}
		steps := StepsAt(opt, k, len(sizes))
		den, err := dens.get(steps)
		if err != nil {
			return nil, err
		}
		scale := CFGScale(opt, known+size, L)
		rows := make([]DenoiseRow, len(where))
		for r := range where {
			rows[r] = DenoiseRow{Z: z[r*W : (r+1)*W], CFG: scale}
			if guided {
				rows[r].ZUncond = zu[r*W : (r+1)*W]
			}
		}
		drawNoise(rows, func(r int) *diffusion.TokenNoise {
			return diffusion.NewTokenNoise(opt.Seed, first+where[r][0], where[r][1], steps, D)
		})
		x0 := Rows(len(rows), D)
		if err := den.Run(rows, x0, nil); err != nil {
			return nil, err
		}
		for r, w := range where {
			ctx.Set(w[0], w[1], x0[r])
		}
		known += size
		if onStep != nil {
			onStep(StepDone{Step: k + 1, Steps: len(sizes), Images: b, Known: known})
		}
	}
	images := make([]Image, b)
	for i := range images {
		tok := ctx.Tokens[i*L*D : (i+1)*L*D]
		images[i] = Image{Index: first + i, Class: classes[i], Tokens: append([]float32(nil), tok...),
			Pixels: m.Tokenizer.Decode(tok)}
	}
	return images, nil
}

// condition runs step k's transformer pass over the batch and fills z (and zu, guided) with
// the conditioning at where's (image, position) pairs: one plain call without the cache, or
// ConditionCached with each image's cache.
func (m *Model) condition(ctx *ContextBatch, caches []ImageCache, orders [][]int, where [][2]int, known, size, k, numSteps int, opt Options, z, zu []float32) error {
	if caches == nil {
		return ctx.ConditionPicked(m.Transformer, where, z, zu)
	}
	L, D := ctx.SeqLen, ctx.TokenDim
	rows := make([]CacheRow, ctx.Rows)
	for i := range rows {
		rows[i] = CacheRow{Cache: &caches[i], Tokens: ctx.Tokens[i*L*D : (i+1)*L*D], Mask: ctx.Mask[i*L : (i+1)*L],
			Class: int(ctx.ClassIDs[i]), Guided: zu != nil, Settings: opt.Cache, Step: k, NumSteps: numSteps,
			Predict: orders[i][known : known+size]}
	}
	return m.conditionCachedPicked(rows, L, where, z, zu)
}

// conditionCachedPicked runs ConditionCached and keeps the conditioning at the (row, position)
// pairs at: z and zu (guided) get [len(at), W].
func (m *Model) conditionCachedPicked(rows []CacheRow, L int, at [][2]int, z, zu []float32) error {
	W := m.Manifest.Width
	whole := make([]float32, len(rows)*L*W)
	var wholeU []float32
	if zu != nil {
		wholeU = make([]float32, len(rows)*L*W)
	}
	if err := m.ConditionCached(rows, whole, wholeU); err != nil {
		return err
	}
	pickFrom(whole, L, W, at, z)
	if zu != nil {
		pickFrom(wholeU, L, W, at, zu)
	}
	return nil
}

// Rows allocates n rows of d values backed by one slice.
func Rows(n, d int) [][]float64 {
	flat := make([]float64, n*d)
	out := make([][]float64, n)
	for i := range out {
		out[i] = flat[i*d : (i+1)*d]
	}
	return out
}
