package server

import (
	"context"
	"errors"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/scheduler"
	"marspec/store"
)

// Where a new job goes: to this server's scheduler, or (shared store) to the shared queue,
// from which the replica with room claims it.

// roomForJob refuses a job while shutting down or when this scheduler's queue is full. With a
// shared store the bound is on the jobs no replica has claimed yet, and the store's Admit
// counts them in the transaction that inserts (Limits.Waiting): a count here, before the
// insert, let replicas admitting at once all pass it.
func (s *Server) roomForJob() error {
	if s.stopping.Load() {
		return scheduler.ErrClosed
	}
	if s.rep == nil && s.sched.Depth() >= s.sched.Capacity() {
		return scheduler.ErrQueueFull
	}
	return nil
}

// enqueue hands a stored job to the scheduler, or tells the replicas it waits in the shared
// queue. A job the scheduler refuses is deleted again (dropRefused).
func (s *Server) enqueue(job store.Job, plan generation.Plan) error {
	id := job.ID
	if s.rep != nil {
		s.rep.poke()
		s.rep.send(message{Kind: "queued"})
		return nil
	}
	s.hub.track(id, plan, 0, 0, job.Created)
	if err := s.sched.Submit(s.schedulerJob(job, plan, nil)); err != nil {
		s.hub.forget(id)
		s.dropRefused(id)
		return err
	}
	return nil
}

// dropRefused deletes the record of a job the scheduler refused: left queued, it would hold
// one of its key's max_in_flight slots until a restart resumed it, and run although its
// client was told no. It never ran, so it has no objects: only the record goes, and an image
// store that is down or refusing cannot keep it. A database outage is waited out in the
// background until the server stops.
func (s *Server) dropRefused(id string) {
	drop := func() error {
		if err := s.store.Meta.DeleteJob(id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	}
	if err := drop(); err != nil {
		s.log.Warn("store: dropping a refused job; retrying", "id", id, "err", detail(err))
		go func() {
			mayWait := func(time.Duration) bool { return !s.stopping.Load() }
			if err := s.untilAvailable(drop, mayWait, maxWait, "store: dropping a refused job; retrying", "id", id); err != nil {
				s.log.Error("store: dropping a refused job", "id", id, "err", detail(err))
			}
		}()
	}
}

// await returns when the job ends, wait passes or ctx ends, wherever the job runs.
func (s *Server) await(ctx context.Context, id string, wait time.Duration) {
	_, done, unsubscribe := s.hub.subscribe(id)
	defer unsubscribe()
	if done == nil {
		return
	}
	if s.rep != nil { // it may have ended before the subscription
		if j, err := s.store.Job(id); err != nil || ended(j.Status) {
			return
		}
	}
	select {
	case <-done:
	case <-time.After(wait):
	case <-ctx.Done():
	}
}

func ended(status string) bool { return status != api.StatusQueued && status != api.StatusRunning }
