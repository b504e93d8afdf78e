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
	// GenerateEach is Generate that also hands each image to each (when not nil) as soon as
	// it is finished, before the run ends: a caller interrupted midway keeps those.
	GenerateEach(ctx context.Context, classes []int, first int, each func(Image)) (Result, error)
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
	return g.GenerateEach(ctx, classes, first, nil)
}

// GenerateEach runs the batches one by one, as mar.Model.Generate does inside, so the images
// are the same; each batch is handed over when it ends and ctx is checked between batches.
func (g alone) GenerateEach(ctx context.Context, classes []int, first int, each func(Image)) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	batch := g.maxBatch
	if batch < 1 || batch > len(classes) {
		batch = len(classes)
	}
	start := time.Now()
	var out []Image
	for lo := 0; lo < len(classes); lo += batch {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		hi := min(lo+batch, len(classes))
		opt := g.opt
		opt.Batch, opt.FirstIndex = 0, first+lo
		imgs, err := g.model.Generate(classes[lo:hi], opt)
		if err != nil {
			return Result{}, err
		}
		secs := time.Since(start).Seconds()
		for _, im := range imgs {
			img := Image{Index: im.Index, Class: im.Class, Pixels: im.Pixels, Seconds: secs}
			if each != nil {
				each(img)
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

// speculative drafts with the draft pack (or the target itself) and verifies with the target.
type speculative struct {
	target, draft *mar.Model
	cfg           arsampler.Config
	maxBatch      int
}

func (g speculative) Generate(ctx context.Context, classes []int, first int) (Result, error) {
	return g.GenerateEach(ctx, classes, first, nil)
}

func (g speculative) GenerateEach(ctx context.Context, classes []int, first int, each func(Image)) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	var handOver func([]arsampler.Result)
	if each != nil {
		handOver = func(done []arsampler.Result) {
			secs := time.Since(start).Seconds()
			for _, r := range done {
				each(specImage(r, secs))
			}
		}
	}
	res, sum, err := arsampler.GenerateEach(g.target, g.draft, g.cfg, classes, first, g.maxBatch, handOver)
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
