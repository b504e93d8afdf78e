package store

import (
	"context"
	"time"
)

// Queue is what a Meta adds when several replicas share it (PostgreSQL): jobs are not kept
// by the replica that accepted them but claimed from the database by a replica with room,
// which owns the job for a lease it renews while it works. A replica that stops renewing (it
// was killed) loses its jobs when the lease runs out, and another claims them; images are
// deterministic in (seed, index, options), so the job ends with the same bytes. Every write
// an owner makes about a job's state holds only while it still owns the job. Times of leases
// are the database's clock (now()), so replicas' clocks need not agree.
//
// SQLite does not implement Queue: one process owns the file, and resumes at start.
type Queue interface {
	// Claim takes the first job (by priority aged by its wait: QueueRank) that is queued, or
	// whose owner's lease ran out, and makes owner its owner for lease, as a new attempt
	// (Job.Attempt); ok is false when there is none. A job whose cancellation was asked while
	// it had no live owner is ended as cancelled (reason) instead, and one past its queue
	// deadline that never started fails (Deadlines).
	Claim(owner string, lease time.Duration, reason string) (j Job, ok bool, err error)
	// Renew extends owner's lease on the jobs it holds (id → attempt). lost are the ids it no
	// longer holds (ended, or claimed again, by another or by itself as a later attempt);
	// cancel those whose cancellation was asked.
	Renew(owner string, held map[string]int, lease time.Duration) (lost, cancel []string, err error)
	// Release gives owner's unfinished jobs among held back to the queue (a clean shutdown).
	Release(owner string, held map[string]int) error
	// Every write a run makes holds only while its Hold does (the job unfinished, owned by
	// the same replica in the same attempt); ok is false, and nothing is written, otherwise.
	// A replica whose lease lapsed, or a run of an earlier attempt, changes nothing.
	SetRunningOwned(h Hold, id string, at time.Time) (ok bool, err error)
	PutImageOwned(h Hold, img Image) (ok bool, err error)
	FinishOwned(h Hold, id, status, reason string, at time.Time) (ok bool, err error)
	// Owns reports whether h still holds job id (checked before an object is written).
	Owns(h Hold, id string) (bool, error)
	// Cancel asks for a job's cancellation: an unowned job (queued, or its owner's lease ran
	// out) is ended at once with reason; an owned one is marked for its owner.
	Cancel(id, reason string, at time.Time) (CancelOutcome, error)
	// Waiting is the number of queued jobs no replica has claimed.
	Waiting() (int, error)
	// Notify sends msgs, in order, to every replica's Listen on commit, all in one round trip
	// and one commit (each at most about 7,900 bytes).
	Notify(msgs ...string) error
	// Listen calls on with every message Notify sends, from one goroutine, until ctx ends;
	// it reconnects after a lost connection (messages sent meanwhile are missed: callers
	// also poll). state is told of each connection (nil) and each loss (the error).
	Listen(ctx context.Context, on func(msg string), state func(err error))
}

// Hold is one replica's claim on a job: the owner and the attempt of that claim. A job
// claimed again (after a lease ran out, or given back and claimed anew) is a new attempt, so
// a run of the earlier one is fenced off even on the replica that owns the job again.
type Hold struct {
	Owner   string
	Attempt int
}

// CancelOutcome says what Queue.Cancel did.
type CancelOutcome int

// Outcomes of Queue.Cancel.
const (
	CancelEnded     CancelOutcome = iota // the job had no live owner and is now cancelled
	CancelAsked                          // its owner was asked (it ends the job)
	CancelAskedOnce                      // a cancellation was asked before
	CancelFinished                       // the job had ended already
)
