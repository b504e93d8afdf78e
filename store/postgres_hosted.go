package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL's share of Hosted (hosted.go): admission that holds across replicas, the sweep's
// list and its lease. The columns and indexes are migrations/002_keys_idempotency_retention.sql.

// admitLockClass is the first half of the pg_advisory_xact_lock(class, hashtext(key)) that
// serialises one key's admissions while its in-flight limit is counted ("mkey");
// queueLockClass, with 0, serialises every admission while the waiting jobs are counted
// ("mque"). A transaction that takes both takes the key's first.
const (
	admitLockClass = int32(0x6d6b6579)
	queueLockClass = int32(0x6d717565)
)

// pgHostedFilter adds a list filter's key and expiry conditions.
func pgHostedFilter(f Filter, cond string, args []any) (string, []any) {
	if f.Key != "" {
		args = append(args, f.Key)
		cond += fmt.Sprintf(` AND api_key = $%d`, len(args))
	}
	if !f.Alive.IsZero() {
		args = append(args, f.Alive.UnixNano())
		cond += fmt.Sprintf(` AND (retain IS NULL OR finished IS NULL OR status IN ('queued', 'running') OR finished + retain > $%d)`, len(args))
	}
	return cond, args
}

// Admit stores j under its limits and Idempotency-Key (Hosted). Replicas admitting for one
// key with a limit take turns (an advisory lock for the transaction), and so do all replicas
// admitting under a bound on the waiting jobs (another lock), so the count they read includes
// every job the one before inserted: a count read in one statement and an insert in another
// would let two replicas both pass it. Two inserts of the same
// (key, Idempotency-Key) are decided by the unique index: the second waits for the first to
// commit and inserts nothing, then reads the first one's job.
func (p *Postgres) Admit(j Job, limits Limits) (Job, bool, error) {
	for range 3 {
		stored, replayed, raced, err := p.admitOnce(j, limits)
		if !raced {
			return stored, replayed, err
		}
		prev, err := p.JobByIdempotencyKey(j.Key, j.IdempotencyKey)
		if !errors.Is(err, ErrNotFound) {
			return prev, err == nil, err
		}
		// the winner's job was deleted in between: its key is free, try again
	}
	return Job{}, false, fmt.Errorf("job with Idempotency-Key %q: inserted and deleted by others three times in a row", j.IdempotencyKey)
}

// admitOnce is one try of Admit; raced is true when another transaction inserted the same
// (key, Idempotency-Key) after this one looked.
func (p *Postgres) admitOnce(j Job, limits Limits) (stored Job, replayed, raced bool, err error) {
	ctx, cancel := opCtx()
	defer cancel()
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return Job{}, false, false, dbErr(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	if limits.MaxInFlight > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, admitLockClass, j.Key); err != nil {
			return Job{}, false, false, dbErr(err)
		}
	}
	if limits.Waiting > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, queueLockClass); err != nil {
			return Job{}, false, false, dbErr(err)
		}
	}
	if j.IdempotencyKey != "" {
		prev, err := scanPgJob(tx.QueryRow(ctx, `SELECT `+pgJobCols+` FROM jobs WHERE api_key = $1 AND idempotency_key = $2`, j.Key, j.IdempotencyKey))
		switch {
		case err == nil && !prev.ExpiredAt(j.Created):
			return prev, true, false, nil
		case err == nil: // its job expired: the key is free again
			if _, err := tx.Exec(ctx, `UPDATE jobs SET idempotency_key = NULL WHERE id = $1`, prev.ID); err != nil {
				return Job{}, false, false, dbErr(err)
			}
		case !errors.Is(err, ErrNotFound):
			return Job{}, false, false, err
		}
	}
	if limits.MaxInFlight > 0 {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE api_key = $1 AND status IN ('queued', 'running')`, j.Key).Scan(&n); err != nil {
			return Job{}, false, false, dbErr(err)
		}
		if n >= limits.MaxInFlight {
			return Job{}, false, false, &InFlightError{Key: j.Key, Limit: limits.MaxInFlight}
		}
	}
	if limits.Waiting > 0 {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE `+waiting).Scan(&n); err != nil {
			return Job{}, false, false, dbErr(err)
		}
		if n >= limits.Waiting {
			return Job{}, false, false, ErrQueueFull
		}
	}
	n, err := pgInsertJob(ctx, tx, j, ` ON CONFLICT DO NOTHING`)
	if err != nil {
		return Job{}, false, false, err
	}
	if n == 0 {
		return Job{}, false, true, nil
	}
	return j, false, false, dbErr(tx.Commit(ctx))
}

// JobByIdempotencyKey reads the job a key created under an Idempotency-Key (Hosted).
func (p *Postgres) JobByIdempotencyKey(key, idem string) (Job, error) {
	ctx, cancel := opCtx()
	defer cancel()
	return scanPgJob(p.pool.QueryRow(ctx, `SELECT `+pgJobCols+` FROM jobs WHERE api_key = $1 AND idempotency_key = $2`, key, idem))
}

// Expired lists finished jobs whose retention ended by t and whose webhook calls are all made
// or given up (Hosted), by the expiry index.
func (p *Postgres) Expired(t time.Time, limit int) ([]Job, error) {
	return p.jobs(`SELECT `+pgJobCols+` FROM jobs WHERE retain IS NOT NULL AND finished IS NOT NULL AND finished + retain <= $1
		AND status IN ($2, $3, $4) AND `+noPendingDelivery+` ORDER BY finished + retain LIMIT $5`,
		append(append([]any{t.UnixNano()}, finishedStates...), limit)...)
}

// SweepLease takes the one sweeper row for holder until d from now (the database's clock),
// or renews it: another holder gets it only once it has run out.
func (p *Postgres) SweepLease(holder string, d time.Duration) (bool, error) {
	ctx, cancel := opCtx()
	defer cancel()
	var got string
	err := p.pool.QueryRow(ctx, `INSERT INTO sweeper (id, holder, until) VALUES (1, $1, now() + $2::interval)
		ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
		WHERE sweeper.until < now() OR sweeper.holder = EXCLUDED.holder RETURNING holder`, holder, d).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, dbErr(err)
}
