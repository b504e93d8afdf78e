package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL schema is an ordered list of embedded files migrations/NNN_name.sql, applied
// by migrate below rather than by a migration library (goose, migrate): the list is small,
// the code is forty lines, and it adds no dependency. All pending files run in one
// transaction under an advisory lock, so two replicas starting together migrate once and a
// failed file leaves the schema as it was. (A future step that must commit before the next,
// such as CREATE INDEX CONCURRENTLY, would need its own transaction; none does yet.)
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the pg_advisory_xact_lock key that serialises migrations ("marspec").
const migrationLock = 0x6d61727370656300

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
		return err
	}
	if have > len(names) {
		return fmt.Errorf("the database has schema version %d, this binary knows %d: run a newer marspec", have, len(names))
	}
	for v := have + 1; v <= len(names); v++ {
		sql, err := migrationFiles.ReadFile(names[v-1])
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			return fmt.Errorf("migration %s: %w", names[v-1], err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, name) VALUES ($1, $2)`, v, names[v-1]); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
