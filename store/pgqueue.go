package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"marspec/api"
)

var _ Queue = (*Postgres)(nil)

// claimable is a job another replica may take: unfinished, and unowned or its lease run out.
// It is checked both when the row is picked and again in the UPDATE (after the row lock), so
// two replicas never both take a job, whatever snapshot each read (river's #1302 race).
const claimable = `status IN ('queued', 'running') AND (owner IS NULL OR lease_until < now())`

// Claim takes one job with SELECT … FOR UPDATE SKIP LOCKED, in one statement: no transaction
// stays open while the job runs.
func (p *Postgres) Claim(owner string, lease time.Duration, reason string) (Job, bool, error) {
	ctx, cancel := opCtx()
	defer cancel()
	if _, err := p.pool.Exec(ctx, `UPDATE jobs SET status = $1, error = $2, finished = $3, owner = NULL, lease_until = NULL
		WHERE cancel_requested AND `+claimable, api.StatusCancelled, reason, time.Now().UnixNano()); err != nil {
		return Job{}, false, dbErr(err)
	}
	j, err := scanPgJob(p.pool.QueryRow(ctx, `UPDATE jobs SET owner = $1, lease_until = now() + $2::interval, attempt = attempt + 1
		WHERE id = (SELECT id FROM jobs WHERE `+claimable+` ORDER BY created, id LIMIT 1 FOR UPDATE SKIP LOCKED) AND `+claimable+`
		RETURNING `+pgJobCols, owner, lease))
	if errors.Is(err, ErrNotFound) {
		return Job{}, false, nil
	}
	return j, err == nil, err
}

// Renew extends owner's lease on the ids it still owns.
func (p *Postgres) Renew(owner string, ids []string, lease time.Duration) (lost, cancel []string, err error) {
	if len(ids) == 0 {
		return nil, nil, nil
	}
	ctx, done := opCtx()
	defer done()
	rows, err := p.pool.Query(ctx, `UPDATE jobs SET lease_until = now() + $3::interval
		WHERE owner = $1 AND id = ANY($2) AND status IN ('queued', 'running') RETURNING id, cancel_requested`, owner, ids, lease)
	if err != nil {
		return nil, nil, dbErr(err)
	}
	kept := map[string]bool{}
	var id string
	var asked bool
	_, err = pgx.ForEachRow(rows, []any{&id, &asked}, func() error {
		kept[id] = true
		if asked {
			cancel = append(cancel, id)
		}
		return nil
	})
	if err != nil {
		return nil, nil, dbErr(err)
	}
	for _, id := range ids {
		if !kept[id] {
			lost = append(lost, id)
		}
	}
	return lost, cancel, nil
}

// Release hands owner's unfinished jobs back to the queue.
func (p *Postgres) Release(owner string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := p.exec(`UPDATE jobs SET status = $1, owner = NULL, lease_until = NULL
		WHERE owner = $2 AND id = ANY($3) AND status IN ('queued', 'running')`, api.StatusQueued, owner, ids)
	return err
}

// FinishOwned records the final state only while owner owns the unfinished job.
func (p *Postgres) FinishOwned(owner, id, status, reason string, at time.Time) (bool, error) {
	n, err := p.exec(`UPDATE jobs SET status = $1, error = $2, finished = $3, owner = NULL, lease_until = NULL
		WHERE id = $4 AND owner = $5 AND status IN ('queued', 'running')`, status, reason, at.UnixNano(), id, owner)
	return n == 1, err
}

// Cancel ends an unowned job at once or marks an owned one for its owner.
func (p *Postgres) Cancel(id, reason string, at time.Time) (CancelOutcome, error) {
	n, err := p.exec(`UPDATE jobs SET status = $1, error = $2, finished = $3, owner = NULL, lease_until = NULL
		WHERE id = $4 AND `+claimable, api.StatusCancelled, reason, at.UnixNano(), id)
	if err != nil || n == 1 {
		return CancelEnded, err
	}
	n, err = p.exec(`UPDATE jobs SET cancel_requested = TRUE WHERE id = $1 AND status IN ('queued', 'running') AND NOT cancel_requested`, id)
	if err != nil || n == 1 {
		return CancelAsked, err
	}
	j, err := p.Job(id)
	if err != nil {
		return CancelFinished, err
	}
	if j.Status == api.StatusQueued || j.Status == api.StatusRunning {
		return CancelAskedOnce, nil
	}
	return CancelFinished, nil
}

// Waiting counts the queued jobs no replica owns.
func (p *Postgres) Waiting() (int, error) {
	ctx, cancel := opCtx()
	defer cancel()
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'queued' AND owner IS NULL`).Scan(&n)
	return n, dbErr(err)
}

// notifyChannel is the one LISTEN/NOTIFY channel replicas talk on.
const notifyChannel = "marspec"

// Notify sends msg to every listening replica.
func (p *Postgres) Notify(msg string) error {
	_, err := p.exec(`SELECT pg_notify($1, $2)`, notifyChannel, msg)
	return err
}

// Listen holds one connection of its own (outside the pool: a LISTENing connection must not
// be handed to other queries) and reconnects every second while the database is away.
func (p *Postgres) Listen(ctx context.Context, on func(msg string), state func(err error)) {
	cfg := p.pool.Config().ConnConfig.Copy()
	for ctx.Err() == nil {
		err := p.listenOnce(ctx, cfg, on, state)
		if ctx.Err() != nil {
			return
		}
		state(err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (p *Postgres) listenOnce(ctx context.Context, cfg *pgx.ConnConfig, on func(string), state func(error)) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+notifyChannel); err != nil {
		return err
	}
	state(nil)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		on(n.Payload)
	}
}
