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
	known() map[string]int // tokens known per job, over unfinished images (progress)
}

// groupKey says which jobs may share an engine. Target/draft images carry all their options
// (mar.Stepper), so they group by pack only. A speculative engine fixes its sampling options
// and its Job has no seed or owner yet, so spec jobs group by their whole configuration
// (seed included); auto gamma adapts to the batch it runs in, so such a job gets its own.
func groupKey(id string, p *generation.Plan) string {
	if p.Spec == nil {
		return "stepper/" + p.Pack
	}
	key := fmt.Sprintf("spec/%s/%s/%+v", p.Pack, p.DraftPack, *p.Spec)
	if p.Spec.AutoGamma {
		key += "/" + id
	}
	return key
}

func newEngine(models generation.Models, p *generation.Plan) (engine, error) {
	m, err := models.Model(p.Pack)
	if err != nil {
		return nil, err
	}
	if p.Spec == nil {
		return &stepperEngine{s: mar.NewStepper(m)}, nil
	}
	d, err := models.Model(p.DraftPack)
	if err != nil {
		return nil, err
	}
	e, err := arsampler.NewEngine(m, d, *p.Spec)
	if err != nil {
		return nil, err
	}
	return &specEngine{e: e, owners: map[[2]int][]string{}}, nil
}

type stepperEngine struct{ s *mar.Stepper }

func (e *stepperEngine) add(job string, p *generation.Plan, index int) error {
	return e.s.Add(mar.StepJob{Request: job, Index: index, Class: p.Classes[index], Options: p.Options})
}
func (e *stepperEngine) remove(job string)     { e.s.Remove(job) }
func (e *stepperEngine) active() int           { return e.s.Active() }
func (e *stepperEngine) known() map[string]int { return e.s.Known() }
func (e *stepperEngine) step() ([]finished, error) {
	done, err := e.s.Step()
	out := make([]finished, len(done))
	for i, d := range done {
		out[i] = finished{job: d.Request, img: generation.Image{Index: d.Image.Index, Class: d.Image.Class, Pixels: d.Image.Pixels}}
	}
	return out, err
}

// specEngine routes results of an arsampler.Engine back to jobs. Jobs sharing an engine share
// the seed and settings, so an image is fixed by (index, class): the first job waiting for that
// pair takes it. A removed job's images run to their end and are dropped (the engine has no
// Remove yet).
type specEngine struct {
	e      *arsampler.Engine
	owners map[[2]int][]string
}

func (e *specEngine) add(job string, p *generation.Plan, index int) error {
	key := [2]int{index, p.Classes[index]}
	if err := e.e.Add(arsampler.Job{Index: index, Class: p.Classes[index]}); err != nil {
		return err
	}
	e.owners[key] = append(e.owners[key], job)
	return nil
}

func (e *specEngine) remove(job string) {
	for k, jobs := range e.owners {
		keep := jobs[:0]
		for _, j := range jobs {
			if j != job {
				keep = append(keep, j)
			}
		}
		e.owners[k] = keep
	}
}

func (e *specEngine) active() int           { return e.e.Active() }
func (e *specEngine) known() map[string]int { return nil }

func (e *specEngine) step() ([]finished, error) {
	done, err := e.e.Round()
	if err != nil {
		return nil, err
	}
	var out []finished
	for _, r := range done {
		key := [2]int{r.Index, r.Class}
		jobs := e.owners[key]
		if len(jobs) == 0 {
			continue // its job was removed
		}
		e.owners[key] = jobs[1:]
		st := r.Stats
		out = append(out, finished{job: jobs[0], img: generation.Image{Index: r.Index, Class: r.Class, Pixels: r.Pixels, Spec: &st}})
	}
	return out, nil
}
