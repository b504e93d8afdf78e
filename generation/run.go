package generation

import (
	"context"
	"math"
	"time"

	"marspec/arsampler"
	"marspec/mar"
)

// Result is a finished run of a plan: its images, in index order, and in spec mode the
// statistics of the whole run.
type Result struct {
	Images  []Image
	Summary *arsampler.Summary // spec mode only
	Seconds float64
}

// Generator makes images of one plan. Target-only, draft-only and speculative runs are its
// implementations, so the CLI, the scoring runs and the tests run every mode the same way.
type Generator interface {
	// Generate makes one image per entry of classes; image k gets index first+k. An image
	// depends only on the plan, its index and its class, so chunks of a long run can be made
	// apart (and in any order) and still give the images of one run.
	Generate(ctx context.Context, classes []int, first int) (Result, error)
	// GenerateWatched is Generate that tells w how it goes: each image as soon as it is
	// finished, before the run ends (a caller interrupted midway keeps those), and how far
	// the run is after each AR step or round.
	GenerateWatched(ctx context.Context, classes []int, first int, w Watch) (Result, error)
}

// Watch is what a run tells its caller as it goes; a nil field is not called. Both are called
// from the generating goroutine, once per image and once per AR step (or round): keep them
// cheap.
type Watch struct {
	Image func(Image)
	Step  func(Step)
}

// Step is how far a run is after one AR step of a batch (target and draft modes) or one round
// of the speculative engine (spec mode).
type Step struct {
	Tokens int // decoded so far, finished images counted whole
	Images int // finished so far
	// Step and Steps are the AR steps done and in all of the batch running, of Batch of
	// Batches (target and draft modes); in spec mode Step counts rounds and the others are 0,
	// as a round decodes as many tokens as its drafts earn.
	Step, Steps    int
	Batch, Batches int
}

// NewGenerator opens the plan's models and returns its generator, at most maxBatch images in
// flight (0 = all).
func NewGenerator(plan Plan, models Models, maxBatch int) (Generator, error) {
	m, err := models.Model(plan.Pack, plan.Precision)
	if err != nil {
		return nil, err
	}
	if plan.Spec == nil {
		return alone{model: m, opt: plan.Options, maxBatch: maxBatch}, nil
	}
	var d *mar.Model // nil: self-drafting or early exit, no draft pack
	if !plan.Spec.SelfDraft && !plan.Spec.EarlyExit {
		if d, err = models.Model(plan.DraftPack, plan.Precision); err != nil {
			return nil, err
		}
	}
	return speculative{target: m, draft: d, cfg: *plan.Spec, maxBatch: maxBatch}, nil
}

// alone runs one model by itself (target or draft mode).
type alone struct {
	model    *mar.Model
	opt      mar.Options
	maxBatch int
}

func (g alone) Generate(ctx context.Context, classes []int, first int) (Result, error) {
	return g.GenerateWatched(ctx, classes, first, Watch{})
}

// GenerateWatched runs the batches one by one, as mar.Model.Generate does inside, so the
// images are the same; each batch is handed over when it ends and ctx is checked between
// batches.
func (g alone) GenerateWatched(ctx context.Context, classes []int, first int, w Watch) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	batch := g.maxBatch
	if batch < 1 || batch > len(classes) {
		batch = len(classes)
	}
	L, batches := g.model.Manifest.SeqLen(), (len(classes)+batch-1)/batch
	start := time.Now()
	var out []Image
	for lo := 0; lo < len(classes); lo += batch {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		hi := min(lo+batch, len(classes))
		opt := g.opt
		opt.Batch, opt.FirstIndex = 0, first+lo
		imgs, err := g.model.GenerateWatched(classes[lo:hi], opt, stepsOf(w.Step, lo, L, lo/batch+1, batches))
		if err != nil {
			return Result{}, err
		}
		secs := time.Since(start).Seconds()
		for _, im := range imgs {
			img := Image{Index: im.Index, Class: im.Class, Pixels: im.Pixels, Seconds: secs}
			if w.Image != nil {
				w.Image(img)
			}
			out = append(out, img)
		}
	}
	secs := time.Since(start).Seconds()
	for i := range out {
		out[i].Seconds = secs
	}
	return Result{Images: out, Seconds: secs}, nil
}

// stepsOf turns a batch's AR steps into the run's Steps (nil when nobody watches): before
// the batch, done images were finished, of seqLen tokens each.
func stepsOf(step func(Step), done, seqLen, batch, batches int) func(mar.StepDone) {
	if step == nil {
		return nil
	}
	return func(s mar.StepDone) {
		step(Step{Tokens: done*seqLen + s.Images*s.Known, Images: done, Step: s.Step, Steps: s.Steps, Batch: batch, Batches: batches})
	}
}

// speculative drafts with the draft pack (or the target itself) and verifies with the target.
type speculative struct {
	target, draft *mar.Model
	cfg           arsampler.Config
	maxBatch      int
}

func (g speculative) Generate(ctx context.Context, classes []int, first int) (Result, error) {
	return g.GenerateWatched(ctx, classes, first, Watch{})
}

func (g speculative) GenerateWatched(ctx context.Context, classes []int, first int, w Watch) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	var watch arsampler.Watch
	if w.Image != nil {
		watch.Finished = func(done []arsampler.Result) {
			secs := time.Since(start).Seconds()
			for _, r := range done {
				w.Image(specImage(r, secs))
			}
		}
	}
	if w.Step != nil {
		L := g.target.Manifest.SeqLen()
		watch.Round = func(r arsampler.RoundDone) {
			w.Step(Step{Tokens: r.Finished*L + r.Known, Images: r.Finished, Step: r.Round})
		}
	}
	res, sum, err := arsampler.GenerateWatched(g.target, g.draft, g.cfg, classes, first, g.maxBatch, watch)
	if err != nil {
		return Result{}, err
	}
	secs := time.Since(start).Seconds()
	out := make([]Image, len(res))
	for i, r := range res {
		out[i] = specImage(r, secs)
	}
	return Result{Images: out, Summary: &sum, Seconds: secs}, nil
}

func specImage(r arsampler.Result, secs float64) Image {
	st := r.Stats
	return Image{Index: r.Index, Class: r.Class, Pixels: r.Pixels, Spec: &st, Seconds: secs}
}

// Execute makes every image of plan in this goroutine, at most maxBatch in flight (0 = all):
// the direct path of the CLI. The service runs plans through the scheduler instead, which
// merges requests; both give the same images.
func Execute(ctx context.Context, plan Plan, models Models, maxBatch int) (Result, error) {
	g, err := NewGenerator(plan, models, maxBatch)
	if err != nil {
		return Result{}, err
	}
	return g.Generate(ctx, plan.Classes, 0)
}

// Run is Execute without the statistics.
func Run(ctx context.Context, plan Plan, models Models, maxBatch int) ([]Image, error) {
	res, err := Execute(ctx, plan, models, maxBatch)
	return res.Images, err
}

// AcceptanceRates is the fraction of verified drafts accepted at each token position of a
// run (NaN where none was verified): what the acceptance heatmap draws.
func AcceptanceRates(sum *arsampler.Summary) []float64 {
	rates := make([]float64, len(sum.AcceptedAtPos))
	for i := range rates {
		rates[i] = math.NaN()
		if n := sum.AcceptedAtPos[i] + sum.RejectedAtPos[i]; n > 0 {
			rates[i] = float64(sum.AcceptedAtPos[i]) / float64(n)
		}
	}
	return rates
}

// CatalogFor builds a catalog from models opened at precision, the default of requests that
// name none.
func CatalogFor(models Models, targetPack, draftPack, provider, precision string, maxImages int) (Catalog, error) {
	cat := Catalog{TargetPack: targetPack, DraftPack: draftPack, MaxImages: maxImages, Provider: provider, Precision: precision}
	t, err := models.Model(targetPack, precision)
	if err != nil {
		return cat, err
	}
	cat.Target = t.Manifest
	if draftPack != "" {
		d, err := models.Model(draftPack, precision)
		if err != nil {
			return cat, err
		}
		cat.Draft = d.Manifest
	}
	return cat, nil
}
