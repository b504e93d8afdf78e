package server

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/scheduler"
	"marspec/store"
)

// Priorities and queue deadlines (docs/api.md, "Priorities and deadlines"): a request's
// priority and queue_timeout are checked here, the default timeout is filled in (stored with
// the request, like the seed), and a stored job gets its place and deadline in a scheduler.

// The range of priority: higher runs sooner.
const (
	minPriority = -10
	maxPriority = 10
)

// checkQueueFields refuses a priority or queue_timeout out of range and fills in the
// deployment's default queue_timeout.
func (s *Server) checkQueueFields(req *api.GenerateRequest) error {
	if p := req.Priority; p != nil && (*p < minPriority || *p > maxPriority) {
		return &generation.FieldError{Field: "priority", Value: strconv.Itoa(*p),
			Allowed: fmt.Sprintf("an integer from %d (last) to %d (first); default 0", minPriority, maxPriority)}
	}
	maxWait := s.cfg.MaxQueueTimeout.Seconds()
	if t := req.QueueTimeout; t != nil && (math.IsNaN(*t) || *t <= 0 || *t > maxWait) {
		return &generation.FieldError{Field: "queue_timeout", Value: strconv.FormatFloat(*t, 'g', -1, 64),
			Allowed: fmt.Sprintf("seconds above 0, at most %g (--max-queue-timeout); leave it out for the server's default", maxWait)}
	}
	if req.QueueTimeout == nil && s.cfg.QueueTimeout > 0 {
		d := s.cfg.QueueTimeout.Seconds()
		req.QueueTimeout = &d
	}
	return nil
}

// checkKeyPriority refuses a priority above what the caller's key may ask (its
// max_priority): where the server has keys, the front of the queue is the operator's to hand
// out, not every tenant's to take. A request without a key (an open server) may ask any.
func checkKeyPriority(who caller, req api.GenerateRequest) error {
	if who.key == nil || req.Priority == nil {
		return nil
	}
	most := who.key.highestPriority()
	if p := *req.Priority; p > most {
		return &generation.FieldError{Field: "priority", Value: strconv.Itoa(p),
			Reason:  fmt.Sprintf("above key %q's max_priority %d", who.name, most),
			Allowed: fmt.Sprintf("%d to %d for this key; its max_priority is set in the --keys file", minPriority, most)}
	}
	return nil
}

// schedulerJob is a stored job as its scheduler runs it: its rank among the queued jobs and,
// if it never started (a job resumed or claimed again after it started has met its deadline),
// the deadline it must start by.
func (s *Server) schedulerJob(j store.Job, plan generation.Plan, done map[int]bool) scheduler.Job {
	sj := scheduler.Job{ID: j.ID, Plan: plan, Done: done, Rank: store.QueueRank(j.Created, priority(j.Request), s.cfg.PriorityAging)}
	if d := queueDeadline(j); d != nil && j.Started == nil {
		sj.Deadline = *d
	}
	return sj
}

func priority(req api.GenerateRequest) int {
	if req.Priority == nil {
		return 0
	}
	return *req.Priority
}

// queueDeadline is when a job fails unless it has started; nil without a queue_timeout.
func queueDeadline(j store.Job) *time.Time {
	if j.Request.QueueTimeout == nil {
		return nil
	}
	d := j.Created.Add(time.Duration(*j.Request.QueueTimeout * float64(time.Second)))
	return &d
}
