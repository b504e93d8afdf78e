package server

import (
	"time"

	"marspec/api"
	"marspec/store"
)

// deadlineSweepEvery is how often queue deadlines are checked: a job fails at most this long
// after its deadline, even when no worker frees up.
const deadlineSweepEvery = 500 * time.Millisecond

// sweepDeadlines fails the jobs not started by their queue deadline: those this server's
// scheduler holds (its hub records each end as a run's end) and, with a shared store, those
// waiting in the shared queue (the database fails them; the other replicas are told).
func (s *Server) sweepDeadlines() {
	s.sched.Expire(time.Now())
	if s.rep == nil {
		return
	}
	q, ok := s.rep.q.(store.Deadlines)
	if !ok {
		return
	}
	ids, err := q.ExpireQueued(time.Now(), store.QueueDeadlineReason)
	if err != nil {
		s.log.Warn("shared queue: queue deadline sweep", "err", detail(err))
		return
	}
	for _, id := range ids {
		s.log.Info("job failed: not started before its queue deadline", "id", id)
		s.metrics.jobs.WithLabelValues(api.StatusFailed).Inc()
		s.rep.send(message{Kind: "done", Job: id})
	}
	if len(ids) > 0 {
		s.hooks.poke()
	}
}

// errorCode is the error_code of a job's status and error (see api.Generation.ErrorCode).
func errorCode(status, reason string) string {
	if status == api.StatusFailed && reason == store.QueueDeadlineReason {
		return api.QueueDeadlineExceeded
	}
	return ""
}
