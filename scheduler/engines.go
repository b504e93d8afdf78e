package scheduler

import (
	"fmt"

	"marspec/arsampler"
	"marspec/generation"
	"marspec/mar"
)

// finished is an image an engine completed, with the job it belongs to.
type finished struct {
	job string
	img generation.Image
}

// engine is what a worker drives: images join and leave between steps.
type engine interface {
	add(job string, plan *generation.Plan, index int) error
	remove(job string)
	step() ([]finished, error)
	active() int
	known() map[string]partial // how far each job's unfinished images are, together (progress)
	// drop lets go of every unfinished image, and of what it holds outside Go's memory (the
	// cache's K/V on a GPU), when the engine itself is dropped
	drop()
}

// partial is how far some of a job's images are: the tokens they know, and how many images'
// worth of their time is spent (images is work, where tokens are not: see StepShare).
type partial struct {
	tokens int
	images float64
}

func (p partial) plus(q partial) partial { return partial{p.tokens + q.tokens, p.images + q.images} }

// groupKey says which jobs may share an engine. An engine runs one pack at one precision
// (its graphs). Target/draft images carry all their options (mar.Stepper), so they group by
// that alone. A speculative engine fixes its configuration but each image brings its own seed
// (arsampler.Job.Seed), so spec jobs group by the configuration without the seed; seed 0 means
// "the engine's seed" there, so such jobs get an engine whose seed is 0. Auto gamma adapts to
// the batch it runs in, so such a job gets its own engine. Every precision's rows are
// independent of their batch-mates (int8 quantises activations with a scale per row), so
// jobs at any precision merge.
func groupKey(id string, p *generation.Plan) string {
	model := generation.ModelName(p.Pack, p.Precision)
	if p.Spec == nil {
		return "stepper/" + model
	}
	cfg := *p.Spec
	seed := cfg.Sampling.Seed
	cfg.Sampling.Seed = 0
	key := fmt.Sprintf("spec/%s/%s/%+v", model, p.DraftPack, cfg)
	if seed == 0 {
		key += "/seed0"
	}
	if alone(p) {
		key += "/" + id
	}
	return key
}

func newEngine(models generation.Models, p *generation.Plan) (engine, error) {
	m, err := models.Model(p.Pack, p.Precision)
	if err != nil {
		return nil, err
	}
	if p.Spec == nil {
		return &stepperEngine{s: mar.NewStepper(m)}, nil
	}
	d, err := models.Model(p.DraftPack, p.Precision)
	if err != nil {
		return nil, err
	}
	e, err := arsampler.NewEngine(m, d, *p.Spec)
	if err != nil {
		return nil, err
	}
	return &specEngine{e: e, seqLen: p.SeqLen}, nil
}

type stepperEngine struct{ s *mar.Stepper }

func (e *stepperEngine) add(job string, p *generation.Plan, index int) error {
	return e.s.Add(mar.StepJob{Request: job, Index: index, Class: p.Classes[index], Options: p.Options})
}
func (e *stepperEngine) remove(job string) { e.s.Remove(job) }
func (e *stepperEngine) active() int       { return e.s.Active() }
func (e *stepperEngine) drop()             { e.s.Clear() }

// known weighs an image's AR steps alike (StepShare without costs): a server times none at
// open, and a step of merged images is one pass for all of them whatever each reveals. The
// cache's lazy steps, cheaper than its full ones, weigh alike too.
func (e *stepperEngine) known() map[string]partial {
	out := map[string]partial{}
	for _, pl := range e.s.Places() {
		out[pl.Request] = out[pl.Request].plus(partial{pl.Known, generation.StepShare(nil, pl.Step, pl.Steps)})
	}
	return out
}

func (e *stepperEngine) step() ([]finished, error) {
	done, err := e.s.Step()
	out := make([]finished, len(done))
	for i, d := range done {
		out[i] = finished{job: d.Request, img: generation.Image{Index: d.Image.Index, Class: d.Image.Class, Pixels: d.Image.Pixels}}
	}
	return out, err
}

// specEngine runs an arsampler.Engine; each image carries its job's seed and id, so results
// go back to their job and a cancelled job's images leave the batch at once.
type specEngine struct {
	e      *arsampler.Engine
	seqLen int
}

func (e *specEngine) add(job string, p *generation.Plan, index int) error {
	return e.e.Add(arsampler.Job{Index: index, Class: p.Classes[index], Seed: p.Options.Seed, Request: job})
}

func (e *specEngine) remove(job string) { e.e.Remove(job) }
func (e *specEngine) active() int       { return e.e.Active() }
func (e *specEngine) drop()             {} // its images hold Go memory only

// known takes an image's tokens as its work: speculative rounds follow no fixed schedule of
// steps to weigh, and one costs about another (the drafts and one target pass) while the
// tokens it accepts vary with how well the drafts fit, which a rate over many rounds averages.
func (e *specEngine) known() map[string]partial {
	out := map[string]partial{}
	for job, n := range e.e.Known() {
		out[job] = partial{n, float64(n) / float64(e.seqLen)}
	}
	return out
}

func (e *specEngine) step() ([]finished, error) {
	done, err := e.e.Round()
	if err != nil {
		return nil, err
	}
	out := make([]finished, len(done))
	for i, r := range done {
		st := r.Stats
		out[i] = finished{job: r.Request, img: generation.Image{Index: r.Index, Class: r.Class, Pixels: r.Pixels, Spec: &st}}
	}
	return out, nil
}
