package store

import (
	"database/sql"
	"errors"
	"time"

	"marspec/api"
)

// SQLite's share of Hosted (hosted.go): the columns and indexes of migration 002, and
// admission and expiry on the one database file.

// hostedColumns add to the jobs table what migrations/002_keys_idempotency_retention.sql
// adds on PostgreSQL; a file made before them gets the columns, a new one too (the base
// schema is left as it was, so both kinds of file end the same).
var hostedColumns = []struct{ name, ddl string }{
	{"api_key", `ALTER TABLE jobs ADD COLUMN api_key TEXT NOT NULL DEFAULT ''`},
	{"idempotency_key", `ALTER TABLE jobs ADD COLUMN idempotency_key TEXT`},
	{"request_hash", `ALTER TABLE jobs ADD COLUMN request_hash TEXT NOT NULL DEFAULT ''`},
	{"retain", `ALTER TABLE jobs ADD COLUMN retain INTEGER`},
}

const hostedIndexes = `
CREATE UNIQUE INDEX IF NOT EXISTS jobs_idempotency ON jobs(api_key, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_key_unfinished ON jobs(api_key) WHERE status IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS jobs_key_created ON jobs(api_key, created DESC);
CREATE INDEX IF NOT EXISTS jobs_expiry ON jobs(finished + retain) WHERE retain IS NOT NULL AND finished IS NOT NULL;`

// addHostedColumns brings a database file to the hosted schema (OpenSQLite).
func addHostedColumns(db *sql.DB) error {
	for _, c := range hostedColumns {
		var has int
		if err := db.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = ?`, c.name).Scan(&has); err != nil {
			return err
		}
		if has == 0 {
			if _, err := db.Exec(c.ddl); err != nil {
				return err
			}
		}
	}
	_, err := db.Exec(hostedIndexes)
	return err
}

// sqliteHostedFilter adds a list filter's key and expiry conditions.
func sqliteHostedFilter(f Filter, where []string, args []any) ([]string, []any) {
	if f.Key != "" {
		where, args = append(where, "api_key = ?"), append(args, f.Key)
	}
	if !f.Alive.IsZero() {
		where, args = append(where, "(retain IS NULL OR finished IS NULL OR status IN ('queued', 'running') OR finished + retain > ?)"), append(args, f.Alive.UnixNano())
	}
	return where, args
}

// Admit stores j under its limits and Idempotency-Key (Hosted). The database has one
// connection (OpenSQLite), so the transaction runs alone: nothing comes between the lookup,
// the counts and the insert. (A single server bounds its queue in its scheduler and sets no
// Limits.Waiting; here it counts the queued jobs, as no replica claims any.)
func (s *SQLite) Admit(j Job, limits Limits) (Job, bool, error) {
	tx, err := s.db.Begin()
	if err != nil {
		return Job{}, false, dbErr(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	if j.IdempotencyKey != "" {
		prev, err := scanJob(tx.QueryRow(`SELECT `+jobCols+` FROM jobs WHERE api_key = ? AND idempotency_key = ?`, j.Key, j.IdempotencyKey))
		switch {
		case err == nil && !prev.ExpiredAt(j.Created):
			return prev, true, nil
		case err == nil: // its job expired: the key is free again
			if _, err := tx.Exec(`UPDATE jobs SET idempotency_key = NULL WHERE id = ?`, prev.ID); err != nil {
				return Job{}, false, dbErr(err)
			}
		case !errors.Is(err, ErrNotFound):
			return Job{}, false, err
		}
	}
	if limits.MaxInFlight > 0 {
		var n int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM jobs WHERE api_key = ? AND status IN (?, ?)`, j.Key, api.StatusQueued, api.StatusRunning).Scan(&n); err != nil {
			return Job{}, false, dbErr(err)
		}
		if n >= limits.MaxInFlight {
			return Job{}, false, &InFlightError{Key: j.Key, Limit: limits.MaxInFlight}
		}
	}
	if limits.Waiting > 0 {
		var n int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM jobs WHERE status = ?`, api.StatusQueued).Scan(&n); err != nil {
			return Job{}, false, dbErr(err)
		}
		if n >= limits.Waiting {
			return Job{}, false, ErrQueueFull
		}
	}
	if err := sqliteInsertJob(tx, j); err != nil {
		return Job{}, false, err
	}
	return j, false, dbErr(tx.Commit())
}

// JobByIdempotencyKey reads the job a key created under an Idempotency-Key (Hosted).
func (s *SQLite) JobByIdempotencyKey(key, idem string) (Job, error) {
	return scanJob(s.db.QueryRow(`SELECT `+jobCols+` FROM jobs WHERE api_key = ? AND idempotency_key = ?`, key, idem))
}

// Expired lists finished jobs whose retention ended by t and whose webhook calls are all made
// or given up (Hosted).
func (s *SQLite) Expired(t time.Time, limit int) ([]Job, error) {
	return s.jobs(`SELECT `+jobCols+` FROM jobs WHERE retain IS NOT NULL AND finished IS NOT NULL AND finished + retain <= ?
		AND status IN (?, ?, ?) AND `+noPendingDelivery+` ORDER BY finished + retain LIMIT ?`,
		append(append([]any{t.UnixNano()}, finishedStates...), limit)...)
}

// Now is this process's clock: it alone stamps the jobs' ends (Hosted).
func (s *SQLite) Now() (time.Time, error) { return time.Now(), nil }

// SweepLease is always held: one process owns the file.
func (s *SQLite) SweepLease(string, time.Duration) (bool, error) { return true, nil }
