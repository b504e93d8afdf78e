package store

import (
	"time"

	"github.com/jackc/pgx/v5"
)

var _ Deadlines = (*Postgres)(nil)

// claimOrder is the order jobs are claimed in: by their rank, created − priority × aging ($3,
// nanoseconds), the id breaking ties. A job of priority p is queued as if it had arrived
// p × aging earlier, so a job is passed only by jobs of higher priority that arrive less than
// (their priority − its priority) × aging after it: no job waits behind an endless stream of
// others (QueueRank is the same rule in Go, for a replica's own scheduler).
const claimOrder = `created - priority::bigint * $3::bigint, id`

// DefaultPriorityAging is what one priority level is worth in waiting time unless set.
const DefaultPriorityAging = 5 * time.Second

// QueueRank is a job's place in the queue: its arrival moved priority × aging earlier.
func QueueRank(created time.Time, priority int, aging time.Duration) time.Time {
	return created.Add(-time.Duration(priority) * aging)
}

// SetPriorityAging sets the worth of one priority level for this store's claims.
func (p *Postgres) SetPriorityAging(aging time.Duration) { p.aging.Store(int64(aging)) }

func (p *Postgres) agingNanos() int64 {
	if a := p.aging.Load(); a > 0 {
		return a
	}
	return int64(DefaultPriorityAging)
}

// ExpireQueued fails the jobs that never started by their deadline and that no live replica
// holds (a held one is its owner's to fail: its scheduler checks the deadline too). A job
// whose cancellation was asked is left to end cancelled.
func (p *Postgres) ExpireQueued(now time.Time, reason string) ([]string, error) {
	ctx, cancel := opCtx()
	defer cancel()
	rows, err := p.pool.Query(ctx, `UPDATE jobs SET status = 'failed', error = $2, finished = `+pgNow+`, owner = NULL, lease_until = NULL
		WHERE queue_deadline < $1 AND started IS NULL AND NOT cancel_requested AND `+claimable+` RETURNING id`, now.UnixNano(), reason)
	if err != nil {
		return nil, dbErr(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, dbErr(err)
}
