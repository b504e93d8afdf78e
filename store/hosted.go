package store

import (
	"errors"
	"fmt"
	"time"

	"marspec/api"
)

// What a hosted API needs of the store: a job admitted under its key's quota and
// Idempotency-Key in one step, so that the limits hold across replicas, and the jobs past
// their retention, found for the sweep that one replica at a time runs.

// Hosted is the part of Meta that serves named keys, idempotency and retention.
type Hosted interface {
	// Admit stores j unless an unexpired job of the same Key and IdempotencyKey exists, which
	// it returns instead (replayed true; the caller compares RequestHash); j.Key having
	// limits.MaxInFlight jobs queued or running already is an *InFlightError, and
	// limits.Waiting jobs queued and unclaimed already is ErrQueueFull. The lookup, the counts
	// and the insert are one transaction, under a lock where a count bounds it (replicas
	// admitting at once take turns: no two both pass a count and insert), and a unique index
	// on (Key, IdempotencyKey) decides between replicas inserting the same pair at once: the
	// loser returns the winner's job.
	Admit(j Job, limits Limits) (stored Job, replayed bool, err error)
	// JobByIdempotencyKey is the job key created under Idempotency-Key idem (ErrNotFound: none).
	JobByIdempotencyKey(key, idem string) (Job, error)
	// Expired lists up to limit finished jobs whose retention ended by t (ExpiredAt), soonest
	// expired first, leaving out a job with a webhook delivery still pending (deleting the job
	// would drop the delivery with it): it is listed once its calls are made or given up.
	Expired(t time.Time, limit int) ([]Job, error)
	// Now is the store's clock, by which jobs' ends are stamped (PostgreSQL: the database's
	// now(), whatever time a replica passes to Finish; SQLite: the one process's) and so
	// retention is measured: the sweep and the store check read it.
	Now() (time.Time, error)
	// SweepLease takes or renews, for d, the right to sweep: true for one holder at a time
	// (always true on SQLite, whose one process is alone).
	SweepLease(holder string, d time.Duration) (bool, error)
}

// Limits bound an admission (Hosted.Admit); 0 is no bound.
type Limits struct {
	MaxInFlight int // the job's key's jobs queued or running (the key's max_in_flight)
	Waiting     int // jobs queued that no replica has claimed: the shared queue's bound (--queue)
}

// ErrQueueFull is an admission refused because Limits.Waiting jobs wait already.
var ErrQueueFull = errors.New("the queue is full; retry later")

// InFlightError is a key at its limit of jobs queued or running.
type InFlightError struct {
	Key   string
	Limit int
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("key %q has %d jobs queued or running, its limit (max_in_flight); retry when one ends", e.Key, e.Limit)
}

// ExpiresAt is when a finished job's retention ends; nil while it runs or when kept forever.
func (j Job) ExpiresAt() *time.Time {
	if j.Retain <= 0 || j.Finished == nil || j.Status == api.StatusQueued || j.Status == api.StatusRunning {
		return nil // a job requeued by the store check keeps its old finish time: it runs again
	}
	t := j.Finished.Add(j.Retain)
	return &t
}

// ExpiredAt reports whether the job's retention had ended by t.
func (j Job) ExpiredAt(t time.Time) bool {
	exp := j.ExpiresAt()
	return exp != nil && !exp.After(t)
}

// SweepCut is the moment by which a finished job's retention must have ended for the sweep to
// remove it at now (Expired at SweepCut): grace earlier, so that an answer begun before the
// expiry has been written (the server's grace, server.SweepGrace). The store check takes the
// same list for the expired jobs it leaves to the sweep (and its repair removes).
func SweepCut(now time.Time, grace time.Duration) time.Time { return now.Add(-grace) }

// finished are the states a sweep may remove (never a job still queued or running).
var finishedStates = []any{api.StatusSucceeded, api.StatusFailed, api.StatusCancelled}

// noPendingDelivery is Expired's condition on a job's webhook outbox (both stores: the same
// table): none of its deliveries is still to be made.
const noPendingDelivery = `NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.job_id = jobs.id AND d.state = 'pending')`

// hostedCols are the columns of a job's key, idempotency and retention, read after the
// others (scanJob, scanPgJob) and written with them (CreateJob).
const hostedCols = `api_key, idempotency_key, request_hash, retain`

// hostedArgs are a job's values for hostedCols (NULL for no Idempotency-Key: many may have
// none; NULL retention: kept forever).
func hostedArgs(j Job) []any {
	var idem, retain any
	if j.IdempotencyKey != "" {
		idem = j.IdempotencyKey
	}
	if j.Retain > 0 {
		retain = int64(j.Retain)
	}
	return []any{j.Key, idem, j.RequestHash, retain}
}

// hostedDest are the scan destinations of hostedCols in j.
func hostedDest(j *Job) []any {
	return []any{&j.Key, nullableText{&j.IdempotencyKey}, &j.RequestHash, nullableNanos{&j.Retain}}
}

// nullableText scans TEXT or NULL ("") for both drivers (both take an sql.Scanner).
type nullableText struct{ s *string }

func (n nullableText) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n.s = ""
	case string:
		*n.s = v
	case []byte:
		*n.s = string(v)
	default:
		return fmt.Errorf("text column: unexpected %T", src)
	}
	return nil
}

// nullableNanos scans BIGINT nanoseconds or NULL (0) into a duration.
type nullableNanos struct{ d *time.Duration }

func (n nullableNanos) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n.d = 0
	case int64:
		*n.d = time.Duration(v)
	default:
		return fmt.Errorf("nanoseconds column: unexpected %T", src)
	}
	return nil
}
