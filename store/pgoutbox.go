package store

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

var _ Outbox = (*Postgres)(nil)

// deliveryCols are a delivery's columns as scanDelivery reads them (both stores).
const deliveryCols = `id, job_id, event, url, status, error, started, finished, created, body, state, attempts,
	next_attempt, last_status, last_error, delivered`

// dueDelivery is a delivery a deliverer may claim at $1 (Unix nanoseconds): pending, due, and
// unleased or its lease run out (checked again after the row lock, as claimable is for jobs).
const dueDelivery = `state = 'pending' AND next_attempt <= $1 AND (owner IS NULL OR lease_until < now())`

// ClaimDeliveries leases due deliveries in one statement, at most perKey of one key's held
// by owner: a due delivery's place in its key's line, after the ones owner holds already,
// decides whether it is taken. Two replicas never take the same one (the update checks that
// each row is still due once it holds the row's lock), and no transaction stays open while it
// is delivered.
func (p *Postgres) ClaimDeliveries(owner string, lease time.Duration, now time.Time, limit, perKey int) ([]Delivery, error) {
	ctx, cancel := opCtx()
	defer cancel()
	rows, err := p.pool.Query(ctx, `WITH held AS (
			SELECT j.api_key, count(*) AS n FROM webhook_deliveries d JOIN jobs j ON j.id = d.job_id
			WHERE d.state = 'pending' AND d.owner = $2 AND d.lease_until >= now() GROUP BY j.api_key),
		due AS (
			SELECT d.id, d.next_attempt, d.created,
				row_number() OVER (PARTITION BY j.api_key ORDER BY d.next_attempt, d.created) + COALESCE(h.n, 0) AS place
			FROM webhook_deliveries d JOIN jobs j ON j.id = d.job_id LEFT JOIN held h ON h.api_key = j.api_key
			WHERE d.state = 'pending' AND d.next_attempt <= $1 AND (d.owner IS NULL OR d.lease_until < now()))
		UPDATE webhook_deliveries SET owner = $2, lease_until = now() + $3::interval, attempts = attempts + 1
		WHERE id IN (SELECT id FROM due WHERE place <= $5 ORDER BY next_attempt, created LIMIT $4)
		AND `+dueDelivery+` RETURNING `+deliveryCols, now.UnixNano(), owner, lease, limit, perKey)
	if err != nil {
		return nil, dbErr(err)
	}
	return collectDeliveries(rows)
}

func collectDeliveries(rows pgx.Rows) ([]Delivery, error) {
	defer rows.Close()
	return collect(rows, func(r pgx.Rows) (Delivery, error) { return scanDelivery(r) })
}

// heldDelivery is the condition of a write by a hold ($1 id, $2 owner, $3 attempt).
const heldDelivery = `id = $1 AND owner = $2 AND attempts = $3 AND state = 'pending'`

// FreezeBody keeps the first body given for a delivery.
func (p *Postgres) FreezeBody(h DeliveryHold, body []byte) ([]byte, error) {
	ctx, cancel := opCtx()
	defer cancel()
	var kept string
	err := p.pool.QueryRow(ctx, `UPDATE webhook_deliveries SET body = COALESCE(body, $4) WHERE `+heldDelivery+` RETURNING body`,
		h.ID, h.Owner, h.Attempt, string(body)).Scan(&kept)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return []byte(kept), dbErr(err)
}

// Delivered records a delivery made.
func (p *Postgres) Delivered(h DeliveryHold, status int, at time.Time) (bool, error) {
	n, err := p.exec(`UPDATE webhook_deliveries SET state = 'delivered', last_status = $4, last_error = '', delivered = $5,
		owner = NULL, lease_until = NULL WHERE `+heldDelivery, h.ID, h.Owner, h.Attempt, status, at.UnixNano())
	return n == 1, err
}

// DeliveryFailed records a failed attempt and when to try again (or that none is left).
func (p *Postgres) DeliveryFailed(h DeliveryHold, status int, reason string, next time.Time, giveUp bool) (bool, error) {
	state := DeliveryPending
	if giveUp {
		state = DeliveryFailed
	}
	n, err := p.exec(`UPDATE webhook_deliveries SET state = $4, last_status = $5, last_error = $6, next_attempt = $7,
		owner = NULL, lease_until = NULL WHERE `+heldDelivery, h.ID, h.Owner, h.Attempt, state, status, reason, next.UnixNano())
	return n == 1, err
}

// DeliveriesOf lists a job's deliveries in the order of their events.
func (p *Postgres) DeliveriesOf(job string) ([]Delivery, error) {
	ctx, cancel := opCtx()
	defer cancel()
	rows, err := p.pool.Query(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries WHERE job_id = $1 ORDER BY created, id`, job)
	if err != nil {
		return nil, dbErr(err)
	}
	return collectDeliveries(rows)
}

// PendingDeliveries counts deliveries still to make.
func (p *Postgres) PendingDeliveries() (int, error) {
	ctx, cancel := opCtx()
	defer cancel()
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'`).Scan(&n)
	return n, dbErr(err)
}
