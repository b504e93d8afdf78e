package server

import (
	"context"
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
// queue. A job the scheduler refuses is deleted again.
func (s *Server) enqueue(job store.Job, plan generation.Plan) error {
	id := job.ID
	if s.rep != nil {
		s.rep.poke()
		s.rep.send(message{Kind: "queued"})
		return nil
	}
	s.hub.track(id, plan, 0, 0)
	if err := s.sched.Submit(s.schedulerJob(job, plan, nil)); err != nil {
		s.hub.forget(id)
		if derr := s.store.DeleteJob(id); derr != nil {
			s.log.Error("store: dropping refused job", "id", id, "err", derr)
		}
		return err
	}
	return nil
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
