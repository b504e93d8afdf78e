package mar

import (
	"fmt"
	"sort"

	"marspec/diffusion"
)

// StepJob is one image for a Stepper: its owner (a request id), its index and class, and its
// own sampling options. Options.Batch and Options.FirstIndex are ignored: Index is the image's
// index, which with Options.Seed fixes its order and noise.
type StepJob struct {
	Request string
	Index   int
	Class   int
	Options Options
}

// StepResult is a finished image and the request it belongs to.
type StepResult struct {
	Request string
	Image   Image
}

// Stepper runs target-only (or draft-only) generation over a changing set of images: between
// AR steps images join (Add) and leave (finished, or Remove), and every image keeps its own
// place in its own step schedule. All active images share one transformer pass per step (rows
// that know different numbers of tokens batch together, as the attention mask allows); the
// diffusion head runs once per group of rows that share a denoiser (steps, temperature,
// final-step noise, sampler and eta; with annealing, the steps of the image's AR step) and guidance on/off. An image's tokens depend only on its StepJob, so
// it is bit-identical to Model.Generate of the same (seed, index, class, options), whatever
// ran beside it. Not safe for concurrent use: one goroutine calls Add, Remove and Step.
type Stepper struct {
	model   *Model
	L, D, W int
	active  []*stepImage
	dens    map[denoiserKey]*Denoiser
	// Forwards and Rows count transformer passes (the unguided and guided halves as one) and
	// the rows they carried: Rows/Forwards is the mean batch size.
	Forwards, Rows int
}

type stepImage struct {
	job         StepJob
	order       []int
	sizes       []int
	step, known int
	tokens      []float32  // [L*D]
	mask        []float32  // [L], 1 = unknown
	cache       ImageCache // used when job.Options.Cache is on
}

type denoiserKey struct {
	steps       int
	temperature float64
	finalNoise  bool
	guided      bool
	sampler     diffusion.Sampler
	eta         float64
}

// NewStepper prepares a stepper for model m.
func NewStepper(m *Model) *Stepper {
	man := m.Manifest
	return &Stepper{model: m, L: man.SeqLen(), D: man.TokenDim, W: man.Width, dens: map[denoiserKey]*Denoiser{}}
}

// Add lets an image join; it takes part from the next Step on. Its options are validated
// (and defaults filled) as Model.Generate would.
func (s *Stepper) Add(j StepJob) error {
	if err := s.model.Validate(&j.Options); err != nil {
		return err
	}
	if err := s.model.CheckClasses([]int{j.Class}); err != nil {
		return err
	}
	if j.Index < 0 {
		return fmt.Errorf("image index %d must not be negative", j.Index)
	}
	im := &stepImage{job: j, order: OrderFor(j.Options.Seed, j.Index, s.L), sizes: StepSizes(s.L, j.Options.NumIter),
		tokens: make([]float32, s.L*s.D), mask: make([]float32, s.L)}
	for i := range im.mask {
		im.mask[i] = 1
	}
	s.active = append(s.active, im)
	return nil
}

// Remove drops the unfinished images of request and reports how many there were.
func (s *Stepper) Remove(request string) int {
	keep := s.active[:0]
	for _, im := range s.active {
		if im.job.Request != request {
			keep = append(keep, im)
		} else {
			im.cache.Release()
		}
	}
	n := len(s.active) - len(keep)
	clear(s.active[len(keep):])
	s.active = keep
	return n
}

// Clear drops every unfinished image, releasing the cache each holds on the device.
func (s *Stepper) Clear() {
	for _, im := range s.active {
		im.cache.Release()
	}
	clear(s.active)
	s.active = s.active[:0]
}

// Active is the number of unfinished images.
func (s *Stepper) Active() int { return len(s.active) }

// Place is how far an unfinished image is: the tokens it knows and the AR steps it has run
// of its schedule's.
type Place struct {
	Request     string
	Known       int
	Step, Steps int
}

// Places says how far every unfinished image is (for progress reports: under MAR's schedule
// an image's steps, not its tokens, say how much of its time is spent).
func (s *Stepper) Places() []Place {
	out := make([]Place, len(s.active))
	for i, im := range s.active {
		out[i] = Place{Request: im.job.Request, Known: im.known, Step: im.step, Steps: len(im.sizes)}
	}
	return out
}

type stepRow struct {
	img *stepImage
	pos int
}

// Step runs one AR step of every active image and returns those that finished.
func (s *Stepper) Step() ([]StepResult, error) {
	b := len(s.active)
	if b == 0 {
		return nil, nil
	}
	L, D, W := s.L, s.D, s.W
	guided, cached := false, false
	for _, im := range s.active {
		guided = guided || im.job.Options.guided()
		cached = cached || im.job.Options.Cache.On
	}
	var at [][2]int // the step's (image, position) pairs, in the order the rows below take them
	for i, im := range s.active {
		for _, pos := range im.order[im.known : im.known+im.sizes[im.step]] {
			at = append(at, [2]int{i, pos})
		}
	}
	z := make([]float32, len(at)*W)
	var zu []float32
	if guided {
		zu = make([]float32, len(at)*W)
	}
	if cached {
		if err := s.conditionCached(at, z, zu); err != nil {
			return nil, err
		}
	} else {
		ctx := NewContextBatch(b, L, D)
		for i, im := range s.active {
			copy(ctx.Tokens[i*L*D:], im.tokens)
			copy(ctx.Mask[i*L:], im.mask)
			ctx.ClassIDs[i] = int64(im.job.Class)
		}
		if err := ctx.ConditionPicked(s.model.Transformer, at, z, zu); err != nil {
			return nil, err
		}
	}
	s.Forwards++
	s.Rows += b

	groups := map[denoiserKey][]DenoiseRow{}
	where := map[denoiserKey][]stepRow{}
	next := 0
	for _, im := range s.active {
		opt := im.job.Options
		size := im.sizes[im.step]
		steps := StepsAt(opt, im.step, len(im.sizes))
		key := denoiserKey{steps: steps, temperature: opt.Temperature, finalNoise: opt.FinalStepNoise, guided: opt.guided(),
			sampler: opt.Sampler, eta: opt.Eta}
		scale := CFGScale(opt, im.known+size, L)
		for _, pos := range im.order[im.known : im.known+size] {
			j := next // the row's pick (at above)
			next++
			row := DenoiseRow{Z: z[j*W : (j+1)*W], CFG: scale}
			if key.guided {
				row.ZUncond = zu[j*W : (j+1)*W]
			}
			groups[key] = append(groups[key], row)
			where[key] = append(where[key], stepRow{im, pos})
		}
	}
	for _, key := range sortedKeys(groups) {
		den, err := s.denoiser(key)
		if err != nil {
			return nil, err
		}
		rows := groups[key]
		drawNoise(rows, func(r int) *diffusion.TokenNoise {
			w := where[key][r]
			return diffusion.NewTokenNoise(w.img.job.Options.Seed, w.img.job.Index, w.pos, key.steps, D)
		})
		x0 := Rows(len(rows), D)
		if err := den.Run(rows, x0, nil); err != nil {
			return nil, err
		}
		for r, w := range where[key] {
			dst := w.img.tokens[w.pos*D : (w.pos+1)*D]
			for j := range dst {
				dst[j] = float32(x0[r][j])
			}
			w.img.mask[w.pos] = 0
		}
	}

	var done []StepResult
	keep := s.active[:0]
	for _, im := range s.active {
		im.known += im.sizes[im.step]
		im.step++
		if im.step < len(im.sizes) {
			keep = append(keep, im)
			continue
		}
		im.cache.Release()
		done = append(done, StepResult{Request: im.job.Request, Image: Image{Index: im.job.Index, Class: im.job.Class,
			Tokens: im.tokens, Pixels: s.model.Tokenizer.Decode(im.tokens)}})
	}
	clear(s.active[len(keep):])
	s.active = keep
	return done, nil
}

// conditionCached is the step's transformer pass when an image uses the cache: each image's
// own step decides whether it runs a plain, full or lazy pass (mar/cachestep.go).
func (s *Stepper) conditionCached(at [][2]int, z, zu []float32) error {
	rows := make([]CacheRow, len(s.active))
	for i, im := range s.active {
		size := im.sizes[im.step]
		rows[i] = CacheRow{Cache: &im.cache, Tokens: im.tokens, Mask: im.mask, Class: im.job.Class,
			Guided: im.job.Options.guided(), Settings: im.job.Options.Cache, Step: im.step, NumSteps: len(im.sizes),
			Predict: im.order[im.known : im.known+size]}
	}
	return s.model.conditionCachedPicked(rows, s.L, at, z, zu)
}

func (s *Stepper) denoiser(k denoiserKey) (*Denoiser, error) {
	if d, ok := s.dens[k]; ok {
		return d, nil
	}
	d, err := s.model.NewDenoiser(Options{Steps: k.steps, Temperature: k.temperature, Sampler: k.sampler, Eta: k.eta}, k.finalNoise)
	if err != nil {
		return nil, err
	}
	s.dens[k] = d
	return d, nil
}

// sortedKeys gives the head calls a fixed order (map order is random; results do not depend on
// it, but timings and debugging are easier to follow).
func sortedKeys(m map[denoiserKey][]DenoiseRow) []denoiserKey {
	keys := make([]denoiserKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		x, y := keys[a], keys[b]
		if x.steps != y.steps {
			return x.steps < y.steps
		}
		if x.temperature != y.temperature {
			return x.temperature < y.temperature
		}
		if x.finalNoise != y.finalNoise {
			return !x.finalNoise
		}
		if x.sampler != y.sampler {
			return x.sampler < y.sampler
		}
		if x.eta != y.eta {
			return x.eta < y.eta
		}
		return !x.guided && y.guided
	})
	return keys
}
