package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"marspec/api"
	"marspec/generation"
	"marspec/scheduler"
	"marspec/store"
)

// Where a new job goes: to this server's scheduler, or (shared store) to the shared queue,
// from which the replica with room claims it.

// roomForJob refuses a job while shutting down or when the queue is full: this scheduler's
// jobs, or with a shared store the jobs no replica has claimed yet.
func (s *Server) roomForJob() error {
	if s.stopping.Load() {
		return scheduler.ErrClosed
	}
	if s.rep == nil {
		if s.sched.Depth() >= s.sched.Capacity() {
			return scheduler.ErrQueueFull
		}
		return nil
	}
	n, err := s.rep.q.Waiting()
	if err != nil {
		return err
	}
	if n >= s.cfg.QueueSize {
		return scheduler.ErrQueueFull
	}
	return nil
}

// enqueue hands a stored job to the scheduler, or tells the replicas it waits in the shared
// queue. A job the scheduler refuses is deleted again.
func (s *Server) enqueue(id string, plan generation.Plan) error {
	if s.rep != nil {
		s.rep.poke()
		s.rep.send(message{Kind: "queued"})
		return nil
	}
	s.hub.track(id, plan, 0)
	if err := s.sched.Submit(scheduler.Job{ID: id, Plan: plan}); err != nil {
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

// removeShared is DELETE for a job not running here, with a shared store: a job no replica
// runs is cancelled at once, a running one's owner is told (and renewals tell it too, should
// the notification be missed), a finished one is deleted.
func (s *Server) removeShared(c *gin.Context, id string) {
	out, err := s.rep.q.Cancel(id, cancelReason, time.Now())
	if err != nil {
		s.fail(c, err)
		return
	}
	switch out {
	case store.CancelAskedOnce:
		s.fail(c, fmt.Errorf("job %s is already being cancelled: %w", id, errConflict))
		return
	case store.CancelFinished:
		if err := s.store.DeleteJob(id); err != nil {
			s.fail(c, err)
			return
		}
		c.Status(http.StatusNoContent)
		return
	case store.CancelEnded:
		s.rep.send(message{Kind: "done", Job: id})
	case store.CancelAsked:
		s.rep.send(message{Kind: "cancel", Job: id})
	}
	g, err := s.view(id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, g)
}
