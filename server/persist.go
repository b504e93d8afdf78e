package server

import (
	"errors"
	"time"

	"marspec/store"
)

// Riding out a store outage. A run's writes (its start, an image, the job's end) are written
// until the store takes them, waiting with backoff through store.ErrUnavailable for as long as
// the run can prove it holds the job: alone (SQLite), until the server stops; with a shared
// store, until its lease, as last renewed, runs out. Renewals go on meanwhile, so an object
// store outage is waited out whole; a database outage longer than the lease ends the run
// without a verdict (interrupted), and the job, still unfinished in the database, is claimed
// again when it answers: its stored images count as done, the rest are made again (the same
// bytes), and no job fails because a store was away.

// Backoff between tries of a store write during an outage.
const (
	firstWait = 50 * time.Millisecond
	maxWait   = 2 * time.Second
)

// persist runs call, a store write of job id's run, until it succeeds, fails for a reason no
// wait mends, or the run can no longer wait (mayWait).
func (s *Server) persist(id string, call func() error) error {
	return s.untilAvailable(call, func(d time.Duration) bool { return s.mayWait(id, d) }, maxWait,
		"store unavailable; retrying the write", "job", id)
}

// untilAvailable runs call until it succeeds or fails for a reason no wait mends, trying again
// through store.ErrUnavailable while mayWait allows the next wait, backing off from firstWait
// to at most ceiling; each retry is logged as msg with args. The one retry loop of the store's
// callers: a run's writes (persist) and an event stream's final read (replica.retry).
func (s *Server) untilAvailable(call func() error, mayWait func(time.Duration) bool, ceiling time.Duration, msg string, args ...any) error {
	wait := firstWait
	for {
		err := call()
		if !errors.Is(err, store.ErrUnavailable) || !mayWait(wait) {
			return err
		}
		s.log.Warn(msg, append(args, "err", detail(err), "in", wait)...)
		time.Sleep(wait)
		wait = min(2*wait, ceiling)
	}
}

// mayWait reports whether job id's run may wait d more for a store: the server is not
// stopping and, with a shared store, the run still holds the job until after the wait.
func (s *Server) mayWait(id string, d time.Duration) bool {
	if s.stopping.Load() {
		return false
	}
	if s.rep == nil {
		return true
	}
	until, ok := s.hub.heldUntil(id)
	return ok && time.Now().Add(d).Before(until)
}

// interrupted reports whether a run's error is a store outage it could not wait out: the job
// is neither failed nor done, and runs again (claimed again, or resumed at the next start).
func interrupted(err error) bool { return errors.Is(err, store.ErrUnavailable) }

// detail is the driver's own message of a store outage or refusal, for the log.
func detail(err error) string {
	var down *store.UnavailableError
	var refused *store.RefusedError
	switch {
	case errors.As(err, &down):
		return err.Error() + ": " + down.Detail()
	case errors.As(err, &refused):
		return err.Error() + ": " + refused.Detail()
	}
	return err.Error()
}
