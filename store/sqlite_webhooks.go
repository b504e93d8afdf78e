package store

import (
	"database/sql"
	"errors"
	"time"
)

var _ Outbox = (*SQLite)(nil)

// The webhook outbox in SQLite: the same table and the same rule as PostgreSQL's
// (migrations/003_priority_deadline_webhooks.sql): triggers write a delivery in the statement
// that starts or ends a job that asked for a webhook (an end after the store check's repair
// ran the job again under a new id, as migrations/004_webhook_end_after_rerun.sql; the trigger
// is made anew at every open, so an older file gets it). Priority and queue deadlines need no
// column here: the one process's scheduler holds every queued job and reads them from the
// request.
const sqliteWebhookSchema = `
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  id TEXT PRIMARY KEY, job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, event TEXT NOT NULL, url TEXT NOT NULL,
  status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '', started INTEGER, finished INTEGER, created INTEGER NOT NULL, body TEXT,
  state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0, next_attempt INTEGER NOT NULL DEFAULT 0,
  owner TEXT, lease_until INTEGER, last_status INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '', delivered INTEGER);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries(state, next_attempt);
CREATE INDEX IF NOT EXISTS webhook_deliveries_job ON webhook_deliveries(job_id);
CREATE TRIGGER IF NOT EXISTS jobs_webhook_started AFTER UPDATE OF started ON jobs
WHEN OLD.started IS NULL AND NEW.started IS NOT NULL AND json_extract(NEW.request, '$.webhook') IS NOT NULL
  AND (json_extract(NEW.request, '$.webhook_events') IS NULL
    OR EXISTS (SELECT 1 FROM json_each(NEW.request, '$.webhook_events') WHERE value = 'started'))
BEGIN
  INSERT OR IGNORE INTO webhook_deliveries (id, job_id, event, url, status, started, created)
  VALUES (NEW.id || ':started', NEW.id, 'started', json_extract(NEW.request, '$.webhook'), 'running', NEW.started, NEW.started);
END;
DROP TRIGGER IF EXISTS jobs_webhook_ended;
CREATE TRIGGER jobs_webhook_ended AFTER UPDATE OF status ON jobs
WHEN OLD.status IN ('queued', 'running') AND NEW.status IN ('succeeded', 'failed', 'cancelled')
  AND json_extract(NEW.request, '$.webhook') IS NOT NULL
  AND (json_extract(NEW.request, '$.webhook_events') IS NULL
    OR EXISTS (SELECT 1 FROM json_each(NEW.request, '$.webhook_events') WHERE value = NEW.status))
BEGIN
  INSERT OR IGNORE INTO webhook_deliveries (id, job_id, event, url, status, error, started, finished, created)
  VALUES (NEW.id || ':' || NEW.status || (SELECT CASE WHEN COUNT(*) > 0 THEN ':' || (COUNT(*) + 1) ELSE '' END
      FROM webhook_deliveries WHERE job_id = NEW.id AND event = NEW.status), NEW.id, NEW.status, json_extract(NEW.request, '$.webhook'), NEW.status, NEW.error,
    NEW.started, NEW.finished, COALESCE(NEW.finished, CAST(unixepoch('subsec') * 1e9 AS INTEGER)));
END;`

// addWebhookOutbox adds the outbox and its triggers to a database that lacks them.
func addWebhookOutbox(db *sql.DB) error {
	_, err := db.Exec(sqliteWebhookSchema)
	return err
}

// ClaimDeliveries leases due deliveries, at most perKey of one key's held by owner (one
// process: the lease only matters across a restart, when a claim left by the previous process
// runs out and is taken again). A due delivery's place in its key's line, after the ones
// owner holds already, decides whether it is taken.
func (s *SQLite) ClaimDeliveries(owner string, lease time.Duration, now time.Time, limit, perKey int) ([]Delivery, error) {
	rows, err := s.db.Query(`WITH held AS (
			SELECT j.api_key, COUNT(*) AS n FROM webhook_deliveries d JOIN jobs j ON j.id = d.job_id
			WHERE d.state = 'pending' AND d.owner = ?1 AND d.lease_until >= ?3 GROUP BY j.api_key),
		due AS (
			SELECT d.id, d.next_attempt, d.created,
				ROW_NUMBER() OVER (PARTITION BY j.api_key ORDER BY d.next_attempt, d.created) + COALESCE(h.n, 0) AS place
			FROM webhook_deliveries d JOIN jobs j ON j.id = d.job_id LEFT JOIN held h ON h.api_key = j.api_key
			WHERE d.state = 'pending' AND d.next_attempt <= ?3 AND (d.owner IS NULL OR d.lease_until < ?3))
		UPDATE webhook_deliveries SET owner = ?1, lease_until = ?2, attempts = attempts + 1
		WHERE id IN (SELECT id FROM due WHERE place <= ?5 ORDER BY next_attempt, created LIMIT ?4)
		RETURNING `+deliveryCols, owner, now.Add(lease).UnixNano(), now.UnixNano(), limit, perKey)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	return collect(rows, func(r *sql.Rows) (Delivery, error) { return scanDelivery(r) })
}

// sqliteHeld is the condition of a write by a hold (id, owner, attempt).
const sqliteHeld = `id = ? AND owner = ? AND attempts = ? AND state = 'pending'`

// FreezeBody keeps the first body given for a delivery.
func (s *SQLite) FreezeBody(h DeliveryHold, body []byte) ([]byte, error) {
	var kept string
	err := s.db.QueryRow(`UPDATE webhook_deliveries SET body = COALESCE(body, ?) WHERE `+sqliteHeld+` RETURNING body`,
		string(body), h.ID, h.Owner, h.Attempt).Scan(&kept)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return []byte(kept), dbErr(err)
}

// Delivered records a delivery made.
func (s *SQLite) Delivered(h DeliveryHold, status int, at time.Time) (bool, error) {
	return s.heldWrite(`UPDATE webhook_deliveries SET state = 'delivered', last_status = ?, last_error = '', delivered = ?,
		owner = NULL, lease_until = NULL WHERE `+sqliteHeld, status, at.UnixNano(), h.ID, h.Owner, h.Attempt)
}

// DeliveryFailed records a failed attempt and when to try again (or that none is left).
func (s *SQLite) DeliveryFailed(h DeliveryHold, status int, reason string, next time.Time, giveUp bool) (bool, error) {
	state := DeliveryPending
	if giveUp {
		state = DeliveryFailed
	}
	return s.heldWrite(`UPDATE webhook_deliveries SET state = ?, last_status = ?, last_error = ?, next_attempt = ?,
		owner = NULL, lease_until = NULL WHERE `+sqliteHeld, state, status, reason, next.UnixNano(), h.ID, h.Owner, h.Attempt)
}

func (s *SQLite) heldWrite(query string, args ...any) (bool, error) {
	res, err := s.db.Exec(query, args...)
	if err != nil {
		return false, dbErr(err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// DeliveriesOf lists a job's deliveries in the order of their events.
func (s *SQLite) DeliveriesOf(job string) ([]Delivery, error) {
	rows, err := s.db.Query(`SELECT `+deliveryCols+` FROM webhook_deliveries WHERE job_id = ? ORDER BY created, id`, job)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	return collect(rows, func(r *sql.Rows) (Delivery, error) { return scanDelivery(r) })
}

// PendingDeliveries counts deliveries still to make.
func (s *SQLite) PendingDeliveries() (int, error) {
	var n int
	err := s.db.QueryRow(`SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'pending'`).Scan(&n)
	return n, dbErr(err)
}
