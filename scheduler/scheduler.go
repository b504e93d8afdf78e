// Package scheduler runs generation jobs: a bounded queue, and one worker per engine group that
// merges the images of concurrent jobs into one running batch (continuous batching: an image
// joins when a slot is free and frees it as soon as it is finished). The slots are the
// server's, shared by every group (slots.go): images in flight never exceed Config.MaxBatch
// in all, and a free slot goes to the highest-ranked job of the whole queue. It never sees
// HTTP, and its model runtime is a generation.Models, so tests run it with analytic models.
package scheduler

import (
	"context"
	"errors"
	"sync"
	"time"

	"marspec/api"
	"marspec/generation"
)

// Errors a caller can act on.
var (
	ErrQueueFull = errors.New("the queue is full; retry later")
	ErrClosed    = errors.New("the scheduler is shutting down")
	ErrCancelled = errors.New("cancelled")
	ErrDuplicate = errors.New("a job with this id is already queued or running")
)

// Job is a validated plan to run. Done lists images already made (a resumed job): they are
// skipped and count as progress. Jobs take free slots in Rank order.
type Job struct {
	ID   string
	Plan generation.Plan
	Done map[int]bool
	// Rank orders the queue: earlier runs first (queueorder.go); zero for every job is FIFO.
	Rank time.Time
	// Deadline, if set, is when the job fails unless it has started (ErrQueueDeadline).
	Deadline time.Time
}

// Sink receives what happens to jobs, from the worker goroutines. Images must store the
// images before it returns (an error fails the image's job); Finished is called exactly once
// per accepted job that ends (nil, ErrCancelled, or the failure), never for jobs still pending
// at Shutdown.
type Sink interface {
	Started(id string, at time.Time)
	Progress(id string, p api.Progress)
	// Images stores one engine step's finished images (a job's in index order) and returns
	// each one's error, in the batch's order. It may write them side by side, but what it tells
	// of them (events) keeps the batch's order. EachImage stores them one by one.
	Images(batch []JobImage) []error
	Finished(id string, err error)
}

// Config are the scheduler's dependencies and bounds.
type Config struct {
	Models    generation.Models
	Sink      Sink
	QueueSize int // jobs accepted and not finished; more are refused with ErrQueueFull
	MaxBatch  int // images in flight, in all engine groups together (slots.go)
	// Isolate turns cross-request batching off: an engine runs the images of one job at a
	// time (still batched within the job). It exists to measure what merging requests buys.
	Isolate bool
	// OnStep, if set, is told the batch size of every engine step (metrics).
	OnStep func(group string, images int)
	// Lanes is how many engines a group steps side by side, its images split between them
	// (lanes.go); 0 or 1: one engine per group (a second was no faster on two cores).
	Lanes int
}

// Scheduler owns the workers. Safe for concurrent use.
type Scheduler struct {
	cfg     Config
	mu      sync.Mutex
	jobs    map[string]*running
	queue   []*running // jobs with images left to admit, in rank order (slots.go)
	workers map[string]*worker
	closed  bool
	quit    chan struct{}
	wg      sync.WaitGroup
	held    chan struct{}    // non-nil while Hold is in force: workers wait for it to close
	now     func() time.Time // the clock of jobs' starts and rates (tests set it)
}

// running is a job's live state, guarded by Scheduler.mu.
type running struct {
	job      Job
	group    string
	alone    bool // its group is its own, its images depend on their batch-mates (slots.go)
	next     int  // next image index to admit (never one of job.Done)
	left     int  // images not yet admitted, job.Done left out
	done     int  // images finished (including job.Done)
	inFlight int
	start    time.Time
	started  bool
	// doneAtStart were done when the job started (a resumed job's images): not this run's
	// work, so left out of its rate.
	doneAtStart int
	storing     int   // images finished and handed to the storer, not yet stored (counted in inFlight)
	stop        error // why it ends once storing is 0 (worker.end); no image of it joins meanwhile
	cancelled   bool
	ending      bool // ended; its Finished is being told (it leaves jobs after)
}

// New starts a scheduler.
func New(cfg Config) *Scheduler {
	if cfg.QueueSize < 1 {
		cfg.QueueSize = 64
	}
	if cfg.MaxBatch < 1 {
		cfg.MaxBatch = 32
	}
	return &Scheduler{cfg: cfg, jobs: map[string]*running{}, workers: map[string]*worker{}, quit: make(chan struct{}), now: time.Now}
}

// Submit queues a job or refuses it (ErrQueueFull, ErrClosed, ErrDuplicate).
func (s *Scheduler) Submit(job Job) error { return s.submit(job, true) }

// Readmit queues a job accepted before a restart: the queue bound does not apply (it was
// checked when the job was accepted, and refusing it now would lose it).
func (s *Scheduler) Readmit(job Job) error { return s.submit(job, false) }

func (s *Scheduler) submit(job Job, bounded bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.jobs[job.ID] != nil:
		return ErrDuplicate
	case bounded && s.unfinished() >= s.cfg.QueueSize:
		return ErrQueueFull
	}
	r := &running{job: job, group: groupKey(job.ID, &job.Plan), alone: alone(&job.Plan)}
	for i := range job.Done {
		if i >= 0 && i < job.Plan.Images() {
			r.done++
		}
	}
	r.left = job.Plan.Images() - r.done
	r.skipDone()
	s.jobs[job.ID] = r
	s.queue = byRank(s.queue, r)
	w := s.workers[r.group]
	if w == nil {
		w = &worker{s: s, key: r.group, wake: make(chan struct{}, 1), stored: make(chan storeBatch, stepQueue),
			storing: make(chan struct{}, storeQueue), alone: r.alone}
		s.workers[r.group] = w
		s.wg.Add(2)
		go w.run()
		go w.storeLoop()
	}
	w.pending = byRank(w.pending, r)
	w.poke()
	s.wakeHead(w)
	return nil
}

// Hold keeps every worker from admitting images or stepping until the returned release is
// called (once; later calls do nothing). Jobs submitted meanwhile queue up and then start
// together, merged per engine group as far as MaxBatch allows: a caller that must submit
// several jobs before any runs (a test of merging, a batch of jobs taken over at once) holds
// first.
func (s *Scheduler) Hold() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = make(chan struct{})
	}
	gate := s.held
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.held == gate {
				s.held = nil
			}
			s.mu.Unlock()
			close(gate)
		})
	}
}

// gate is the channel a worker waits on before its next admission (nil: not held).
func (s *Scheduler) gate() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// Cancel stops a queued or running job; its worker reports Finished(id, ErrCancelled). It
// reports whether the job was queued or running.
func (s *Scheduler) Cancel(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.jobs[id]
	if r == nil {
		return false
	}
	r.cancelled = true
	if w := s.workers[r.group]; w != nil {
		w.poke()
	}
	return true
}

// Depth is the number of jobs accepted and not finished.
func (s *Scheduler) Depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unfinished()
}

// unfinished counts the jobs not ending (s.mu held). An ending job stays in s.jobs until its
// Finished returns, but its end is already written, and whoever waited on it may be answered:
// a client that posts again at once must find its slot free.
func (s *Scheduler) unfinished() int {
	n := 0
	for _, r := range s.jobs {
		if !r.ending {
			n++
		}
	}
	return n
}

// Backlog is the number of images of accepted jobs not yet finished: a replica that claims
// jobs from a shared queue claims while this is below its batch size.
func (s *Scheduler) Backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.jobs {
		n += r.job.Plan.Images() - r.done
	}
	return n
}

// Capacity is the queue bound.
func (s *Scheduler) Capacity() int { return s.cfg.QueueSize }

// Has reports whether a job is queued or running.
func (s *Scheduler) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[id] != nil
}

// Close refuses new jobs and tells the workers to stop after their current step, without
// waiting for them (Shutdown waits).
func (s *Scheduler) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.quit)
	}
}

// Shutdown refuses new jobs and stops the workers after their current step. Jobs not finished
// by then get no Finished call: they stay queued or running in the caller's store, to be
// resumed on the next start (images are deterministic, so a resumed job makes the same ones).
func (s *Scheduler) Shutdown(ctx context.Context) error {
	s.Close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
