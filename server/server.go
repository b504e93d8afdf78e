// Package server is the HTTP adapter of the marspec service: it decodes and validates
// requests (generation.Validate), hands jobs to the scheduler, stores results (store) and
// encodes answers (api). It never touches tensors.
package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/scheduler"
	"marspec/store"
)

// Server is the service: scheduler, store, live job state and HTTP routes.
type Server struct {
	cfg      Config
	cat      generation.Catalog
	store    *store.Store
	sched    *scheduler.Scheduler
	hub      *hub
	rep      *replica // set when the store is shared with other replicas (store.Queue)
	metrics  *metrics
	keys     *keyring   // named API keys and --token (keys.go); none: open
	ret      *retention // the sweep of expired jobs and the reads it waits for (retention.go)
	log      *slog.Logger
	ui       fs.FS
	handler  http.Handler
	stopping atomic.Bool
	bg       *background // the deadline sweep and the webhook deliverer (background.go)
	hooks    *deliverer  // nil: webhooks are off (no --webhook-secret)
	// afterImage, if set (tests), runs after an image is stored, in the worker goroutine: a
	// test holds a job mid-run with it.
	afterImage func(job string, index int)
}

// Deps are what a server runs on.
type Deps struct {
	Catalog generation.Catalog // the packs requests are validated against
	Models  generation.Models  // the runtime that makes images
	Store   *store.Store
	UI      fs.FS // the gallery (web.FS) served at /; nil serves none
	Log     *slog.Logger
}

// New builds a server; cfg should have passed Check.
func New(cfg Config, d Deps) *Server {
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, cat: d.Catalog, store: d.Store, ui: d.UI, log: log}
	s.metrics = newMetrics()
	s.keys = newKeyring(cfg, newKeyMetrics(s.metrics.reg))
	s.ret = newRetention(s)
	s.hub = newHub(s)
	s.sched = scheduler.New(scheduler.Config{Models: d.Models, Sink: s.hub, QueueSize: cfg.QueueSize, MaxBatch: cfg.MaxBatch, Lanes: cfg.Lanes,
		Isolate: !cfg.CrossBatch, OnStep: func(_ string, n int) { s.metrics.batch.Observe(float64(n)) }})
	s.metrics.queueDepth(s.sched.Depth)
	s.metrics.openingMemo(d.Models)
	s.handler = s.routes()
	if q, ok := d.Store.Meta.(store.Queue); ok {
		if dl, ok := q.(store.Deadlines); ok {
			dl.SetPriorityAging(cfg.PriorityAging)
		}
		s.rep = newReplica(s, q, cfg.Lease)
		s.metrics.queueWaiting(q.Waiting)
		s.rep.start()
	}
	s.hooks = newDeliverer(s)
	s.startBackground()
	return s
}

// Handler is the HTTP handler (routes, limits, logging).
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer wraps the handler with the configured timeouts.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Addr: s.cfg.Addr, Handler: s.handler, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: s.cfg.ReadTimeout, WriteTimeout: s.cfg.WriteTimeout, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10}
}

// Resume hands the jobs a previous run left queued or running back to the scheduler, keeping
// their finished images; a job that cannot run again is marked failed with the reason. With a
// shared store it does nothing: jobs left by a stopped replica are claimed from the queue
// when its lease runs out, by whichever replica has room.
func (s *Server) Resume() (resumed, failed int, err error) {
	if s.rep != nil {
		return 0, 0, nil
	}
	jobs, err := s.store.Unfinished()
	if err != nil {
		return 0, 0, err
	}
	for _, j := range jobs {
		if j.CancelAsked { // a DELETE was answered 202 before the restart: it ends cancelled
			if err := s.store.Finish(j.ID, api.StatusCancelled, cancelReason, time.Now()); err != nil {
				return resumed, failed, err
			}
			continue
		}
		if err := s.resume(j); err != nil {
			failed++
			reason := "not resumed after restart: " + err.Error()
			s.log.Warn("job not resumed", "id", j.ID, "reason", reason)
			if ferr := s.store.Finish(j.ID, api.StatusFailed, reason, time.Now()); ferr != nil {
				return resumed, failed, ferr
			}
			continue
		}
		resumed++
	}
	return resumed, failed, nil
}

func (s *Server) resume(j store.Job) error { return s.readmit(j, true) }

// notRunnable is a job this server can never run: its request or its models' settings no
// longer fit (a failure to read the store is not one: the job may run later).
type notRunnable struct{ error }

func (e notRunnable) Unwrap() error { return e.error }

// readmit hands a stored job to the scheduler, keeping its finished images: a job resumed
// after a restart (requeue: SQLite) or claimed from the shared queue.
func (s *Server) readmit(j store.Job, requeue bool) error {
	plan, err := generation.Validate(j.Request, s.cat)
	if err != nil {
		return notRunnable{err}
	}
	if plan.Params() != j.Settings.Params {
		return notRunnable{fmt.Errorf("the models or their settings changed (was %q, now %q)", j.Settings.Params, plan.Params())}
	}
	imgs, err := s.store.Images(j.ID)
	if err != nil {
		return err
	}
	done := map[int]bool{}
	for _, im := range imgs {
		done[im.Index] = true
	}
	if requeue {
		if err := s.store.Requeue(j.ID); err != nil {
			return err
		}
	}
	s.hub.track(j.ID, plan, len(imgs), j.Attempt, j.Created)
	if err := s.sched.Readmit(s.schedulerJob(j, plan, done)); err != nil {
		s.hub.forget(j.ID)
		return err
	}
	return nil
}

// Shutdown stops accepting work (new jobs get 503), gives running and queued jobs until
// Config.Drain to finish, then stops the workers after their current step and closes event
// streams. Jobs not finished by then stay queued or running in the store and resume on the
// next start (their images are deterministic, so a resumed job makes the same ones). With a
// shared store they go back to the queue at once, for the other replicas.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopping.Store(true)
	drain := time.NewTimer(s.cfg.Drain)
	defer drain.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
wait:
	for s.sched.Depth() > 0 {
		select {
		case <-tick.C:
		case <-drain.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	if n := s.sched.Depth(); n > 0 {
		s.log.Info("shutdown: jobs left to resume on the next start", "jobs", n)
	}
	err := s.sched.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("workers still busy at the shutdown deadline: %w", err)
	}
	if s.rep != nil {
		s.rep.giveBack()
		err = errors.Join(err, s.rep.halt(ctx)) // its own words: the workers may have stopped in time
	}
	s.bg.halt() // after the workers: a run's last event is recorded; its delivery waits in the outbox
	s.hub.closeAll()
	return err
}
