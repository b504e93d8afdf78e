package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	if _, err := p.pool.Exec(ctx, `UPDATE jobs SET status = $1, error = $2, finished = `+pgNow+`, owner = NULL, lease_until = NULL
		WHERE cancel_requested AND `+claimable, api.StatusCancelled, reason); err != nil {
		return Job{}, false, dbErr(err)
	}
	if _, err := p.ExpireQueued(time.Now(), QueueDeadlineReason); err != nil {
		return Job{}, false, err
	}
	j, err := scanPgJob(p.pool.QueryRow(ctx, `UPDATE jobs SET owner = $1, lease_until = now() + $2::interval, attempt = attempt + 1
		WHERE id = (SELECT id FROM jobs WHERE `+claimable+` ORDER BY `+claimOrder+` LIMIT 1 FOR UPDATE SKIP LOCKED) AND `+claimable+`
		RETURNING `+pgJobCols, owner, lease, p.agingNanos()))
	if errors.Is(err, ErrNotFound) {
		return Job{}, false, nil
	}
	return j, err == nil, err
}

// owned is the condition of a write by hold ($1 owner, $2 attempt) on job $3.
const owned = `id = $3 AND owner = $1 AND attempt = $2 AND status IN ('queued', 'running')`

// Renew extends owner's lease on the jobs it holds, in the attempt it holds them.
func (p *Postgres) Renew(owner string, held map[string]int, lease time.Duration) (lost, cancel []string, err error) {
	if len(held) == 0 {
		return nil, nil, nil
	}
	ids, attempts := heldArrays(held)
	ctx, done := opCtx()
	defer done()
	rows, err := p.pool.Query(ctx, `UPDATE jobs SET lease_until = now() + $4::interval
		FROM unnest($2::text[], $3::int[]) AS h(id, attempt)
		WHERE jobs.id = h.id AND jobs.attempt = h.attempt AND owner = $1 AND status IN ('queued', 'running')
		RETURNING jobs.id, cancel_requested`, owner, ids, attempts, lease)
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

func heldArrays(held map[string]int) (ids []string, attempts []int32) {
	for id, a := range held {
		ids, attempts = append(ids, id), append(attempts, int32(a))
	}
	return ids, attempts
}

// Release hands owner's unfinished jobs back to the queue.
func (p *Postgres) Release(owner string, held map[string]int) error {
	if len(held) == 0 {
		return nil
	}
	ids, attempts := heldArrays(held)
	_, err := p.exec(`UPDATE jobs SET status = $1, owner = NULL, lease_until = NULL
		FROM unnest($3::text[], $4::int[]) AS h(id, attempt)
		WHERE jobs.id = h.id AND jobs.attempt = h.attempt AND owner = $2 AND status IN ('queued', 'running')`,
		api.StatusQueued, owner, ids, attempts)
	return err
}

// SetRunningOwned marks the job running from at (keeping the first start) while h holds it.
func (p *Postgres) SetRunningOwned(h Hold, id string, at time.Time) (bool, error) {
	n, err := p.exec(`UPDATE jobs SET status = 'running', started = COALESCE(started, $4) WHERE `+owned,
		h.Owner, h.Attempt, id, at.UnixNano())
	return n == 1, err
}

// PutImageOwned records an image while h holds its job, in one statement (the ownership
// check and the insert see the same row); a record already there (an earlier attempt made
// the same image) is kept.
func (p *Postgres) PutImageOwned(h Hold, img Image) (bool, error) {
	stats, err := statsJSON(img.Stats)
	if err != nil {
		return false, err
	}
	ctx, cancel := opCtx()
	defer cancel()
	var holds bool
	err = p.pool.QueryRow(ctx, `WITH holder AS (SELECT id FROM jobs WHERE `+owned+` FOR SHARE),
		ins AS (INSERT INTO images (id, job_id, idx, class, class_name, seconds, stats)
			SELECT $4, holder.id, $5, $6, $7, $8, $9 FROM holder ON CONFLICT DO NOTHING)
		SELECT EXISTS (SELECT 1 FROM holder)`,
		h.Owner, h.Attempt, img.JobID, img.ID, img.Index, img.Class, img.ClassName, img.Seconds, stats).Scan(&holds)
	return holds, dbErr(err)
}

// FinishOwned records the final state only while h holds the job, at the database's clock.
func (p *Postgres) FinishOwned(h Hold, id, status, reason string, _ time.Time) (bool, error) {
	n, err := p.exec(`UPDATE jobs SET status = $4, error = $5, finished = `+pgNow+`, owner = NULL, lease_until = NULL WHERE `+owned,
		h.Owner, h.Attempt, id, status, reason)
	return n == 1, err
}

// Owns reports whether h holds the job.
func (p *Postgres) Owns(h Hold, id string) (bool, error) {
	ctx, cancel := opCtx()
	defer cancel()
	var holds bool
	err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE `+owned+`)`, h.Owner, h.Attempt, id).Scan(&holds)
	return holds, dbErr(err)
}

// Cancel ends an unowned job at once (at the database's clock) or marks an owned one for its
// owner.
func (p *Postgres) Cancel(id, reason string, _ time.Time) (CancelOutcome, error) {
	n, err := p.exec(`UPDATE jobs SET status = $1, error = $2, finished = `+pgNow+`, owner = NULL, lease_until = NULL
		WHERE id = $3 AND `+claimable, api.StatusCancelled, reason, id)
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

// waiting is the condition of a queued job no replica owns (Waiting, and Admit's bound).
const waiting = `status = 'queued' AND owner IS NULL`

// Waiting counts the queued jobs no replica owns.
func (p *Postgres) Waiting() (int, error) {
	ctx, cancel := opCtx()
	defer cancel()
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE `+waiting).Scan(&n)
	return n, dbErr(err)
}

// notifyChannel is the one LISTEN/NOTIFY channel replicas talk on.
const notifyChannel = "marspec"

// Notify sends msgs to every listening replica in one statement: a notifying transaction
// commits like a write, so one per message cost a round trip and a WAL flush each. A volatile
// function in the select list runs after ORDER BY, so the messages are made in their order,
// and one transaction's notifications are delivered in the order they were made (identical
// ones once).
func (p *Postgres) Notify(msgs ...string) error {
	if len(msgs) == 0 {
		return nil
	}
	_, err := p.exec(`SELECT pg_notify($1, t.m) FROM unnest($2::text[]) WITH ORDINALITY AS t(m, i) ORDER BY t.i`, notifyChannel, msgs)
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
		wait, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case err == nil:
			on(n.Payload)
			continue
		case ctx.Err() != nil || !pgconn.Timeout(err):
			return err
		}
		// idle: a connection cut without a word (a dropped route, a dead server) would wait
		// forever, so it must answer a ping or be replaced
		ping, cancel := context.WithTimeout(ctx, listenPing)
		err = conn.Ping(ping)
		cancel()
		if err != nil {
			return fmt.Errorf("listening connection did not answer a ping: %w", err)
		}
	}
}

// A listening connection idle for listenIdle is pinged, and replaced if it does not answer
// within listenPing (variables: a test shortens them).
var (
	listenIdle = 15 * time.Second
	listenPing = 5 * time.Second
)
