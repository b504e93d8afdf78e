package scheduler

import (
	"errors"
	"slices"
	"sort"
	"time"
)

// The order jobs take free slots in, and queue deadlines. Images are admitted from the jobs of
// the whole queue, every group's, in rank order (Job.Rank: the arrival moved earlier by
// priority, see store.QueueRank; slots.go), the earlier arrival first among equal ranks;
// images already in a batch keep their slots (no preemption), so a job of higher rank starts
// when the next slot frees.
// A job that has not started by its Job.Deadline ends with ErrQueueDeadline: checked when
// its images would be admitted, and by Expire, which a caller runs on a timer, so a job
// fails on time even while its worker is held or busy with a long step.

// ErrQueueDeadline ends a job that did not start before its deadline.
var ErrQueueDeadline = errors.New("not started before its queue deadline")

// byRank inserts r into pending (kept in rank order) after every job of the same or an
// earlier rank.
func byRank(pending []*running, r *running) []*running {
	i := sort.Search(len(pending), func(i int) bool { return pending[i].job.Rank.After(r.job.Rank) })
	return slices.Insert(pending, i, r)
}

// expired reports whether r is a job that has not started and whose deadline passed at now.
func (r *running) expired(now time.Time) bool {
	return !r.started && !r.job.Deadline.IsZero() && now.After(r.job.Deadline)
}

// Expire ends every job not started by its deadline (at now) with ErrQueueDeadline and
// returns their ids. The sink hears of each outside the lock, as from a worker.
func (s *Scheduler) Expire(now time.Time) []string {
	s.mu.Lock()
	var ended []*running
	for _, r := range s.jobs {
		if r.ending || r.cancelled || !r.expired(now) {
			continue
		}
		r.ending = true
		ended = append(ended, r)
		if w := s.workers[r.group]; w != nil {
			w.compact()
			w.poke() // with nothing left to run it retires
		}
	}
	s.wakeHead(nil) // the head may have been one of them
	s.mu.Unlock()
	ids := make([]string, 0, len(ended))
	for _, r := range ended {
		s.cfg.Sink.Finished(r.job.ID, ErrQueueDeadline)
		s.mu.Lock()
		if s.jobs[r.job.ID] == r {
			delete(s.jobs, r.job.ID)
		}
		s.mu.Unlock()
		ids = append(ids, r.job.ID)
	}
	return ids
}
