package arsampler

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"marspec/mar"
)

// Job is one image to generate. All randomness of the image (its generation order, the noise of
// every token's diffusion runs, its acceptance and resampling draws) is keyed by (Seed, Index,
// position) and nothing else, so an image does not depend on the batch it runs in, on other
// requests merged into that batch, or on when it joins (with a fixed gamma: auto gamma pools its
// alpha estimate over the batch).
type Job struct {
	Index int
	Class int
	// Seed is the image's own seed; 0 means the configuration's (Config.Sampling.Seed).
	Seed uint64
	// Request names the request the image belongs to, for Engine.Remove and the caller's
	// bookkeeping; the engine never interprets it.
	Request string
}

// Result is a finished image and its statistics.
type Result struct {
	Index, Class int
	Seed         uint64 // the seed the image used (the configuration's when its Job had 0)
	Request      string
	Tokens       []float32
	Pixels       []uint8
	Stats        ImageStats
	slot         int // position in Run's job list; -1 for images added by Add
}

// Add lets images join the batch; they take part from the next round on.
func (e *Engine) Add(jobs ...Job) error { return e.add(-1, jobs) }

// add admits jobs; the i-th remembers slot first+i (or -1 when first is -1).
func (e *Engine) add(first int, jobs []Job) error {
	for _, j := range jobs {
		if j.Class < 0 || j.Class >= len(e.target.Manifest.Classes) {
			return fmt.Errorf("class %d out of range (allowed: 0 to %d)", j.Class, len(e.target.Manifest.Classes)-1)
		}
		if j.Index < 0 {
			return fmt.Errorf("image index %d must not be negative", j.Index)
		}
	}
	for i, j := range jobs {
		seed := j.Seed
		if seed == 0 {
			seed = e.cfg.Sampling.Seed
		}
		noise := e.noise
		noise.Seed = seed
		st := &imageState{job: j, seed: seed, noise: noise, slot: -1,
			order:  mar.OrderFor(seed, j.Index, e.L),
			tokens: make([]float32, e.L*e.D), mask: make([]float32, e.L),
			rng:   rand.New(rand.NewPCG(seed^0x3c6ef372fe94f82b, uint64(j.Index))),
			stats: newImageStats(e.L)}
		if first >= 0 {
			st.slot = first + i
		}
		for k := range st.mask {
			st.mask[k] = 1
		}
		e.active = append(e.active, st)
	}
	return nil
}

// Remove drops the unfinished images of a request (a cancelled request) and returns how many it
// dropped. Call it between rounds; the other images are not affected.
func (e *Engine) Remove(request string) int {
	keep := e.active[:0]
	for _, st := range e.active {
		if st.job.Request != request {
			keep = append(keep, st)
		}
	}
	n := len(e.active) - len(keep)
	clear(e.active[len(keep):]) // let the dropped images be collected
	e.active = keep
	return n
}

// Active is the number of unfinished images.
func (e *Engine) Active() int { return len(e.active) }

// Known counts the verified tokens of the unfinished images per request (live progress).
func (e *Engine) Known() map[string]int {
	out := map[string]int{}
	for _, st := range e.active {
		out[st.job.Request] += st.known
	}
	return out
}

// Run generates all jobs, keeping at most maxBatch images in flight: finished images leave and
// waiting ones join between rounds. Results come back in job order, matched by the job's
// position in the list (two requests may both have an image with index 0).
func (e *Engine) Run(jobs []Job, maxBatch int) ([]Result, error) {
	return e.RunWatched(jobs, maxBatch, Watch{})
}

// Watch is what a run tells its caller as it goes; a nil field is not called.
type Watch struct {
	// Finished gets each round's finished images as soon as the round ends, so a caller can
	// keep or count them before the whole run is over.
	Finished func([]Result)
	// Round is told after every round how far the run is (progress inside an image).
	Round func(RoundDone)
}

// RoundDone is how far a run is after one of its rounds.
type RoundDone struct {
	Round    int // rounds so far
	Finished int // images finished so far
	Known    int // verified tokens of the unfinished images
}

// RunWatched is Run that tells w how it goes.
func (e *Engine) RunWatched(jobs []Job, maxBatch int, w Watch) ([]Result, error) {
	if maxBatch < 1 {
		maxBatch = len(jobs)
	}
	results := make([]Result, 0, len(jobs))
	next := 0
	for round := 1; next < len(jobs) || e.Active() > 0; round++ {
		if free := maxBatch - e.Active(); free > 0 && next < len(jobs) {
			n := min(free, len(jobs)-next)
			if err := e.add(next, jobs[next:next+n]); err != nil {
				return nil, err
			}
			next += n
		}
		done, err := e.Round()
		if err != nil {
			return nil, err
		}
		if w.Finished != nil && len(done) > 0 {
			w.Finished(done)
		}
		results = append(results, done...)
		if w.Round != nil {
			known := 0
			for _, st := range e.active {
				known += st.known
			}
			w.Round(RoundDone{Round: round, Finished: len(results), Known: known})
		}
	}
	sort.Slice(results, func(a, b int) bool { return results[a].slot < results[b].slot })
	return results, nil
}

// Generate runs speculative decoding for one image per class (image i gets index
// firstIndex+i and the configuration's seed) with at most maxBatch in flight, and summarises the
// run with its wall time. draft may be nil when cfg.SelfDraft is set.
func Generate(target, draft *mar.Model, cfg Config, classes []int, firstIndex, maxBatch int) ([]Result, Summary, error) {
	return GenerateWatched(target, draft, cfg, classes, firstIndex, maxBatch, Watch{})
}

// GenerateWatched is Generate that tells w how it goes (Engine.RunWatched).
func GenerateWatched(target, draft *mar.Model, cfg Config, classes []int, firstIndex, maxBatch int, w Watch) ([]Result, Summary, error) {
	jobs := make([]Job, len(classes))
	for i, c := range classes {
		jobs[i] = Job{Index: firstIndex + i, Class: c}
	}
	return generateJobs(target, draft, cfg, jobs, maxBatch, w)
}

// GenerateJobs is Generate for explicit jobs (their own seeds and requests).
func GenerateJobs(target, draft *mar.Model, cfg Config, jobs []Job, maxBatch int) ([]Result, Summary, error) {
	return generateJobs(target, draft, cfg, jobs, maxBatch, Watch{})
}

func generateJobs(target, draft *mar.Model, cfg Config, jobs []Job, maxBatch int, w Watch) ([]Result, Summary, error) {
	e, err := NewEngine(target, draft, cfg)
	if err != nil {
		return nil, Summary{}, err
	}
	start := time.Now()
	res, err := e.RunWatched(jobs, maxBatch, w)
	if err != nil {
		return nil, Summary{}, err
	}
	return res, Summarize(res, e.Stats, time.Since(start).Seconds()), nil
}
