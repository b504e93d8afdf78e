package store

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"testing"

	"marspec/store/storetest"
)

// Replicas starting together migrate once; a database migrated by a newer binary is refused.
func TestPostgresMigrations(t *testing.T) {
	dsn := storetest.Postgres(t)
	var wg sync.WaitGroup
	opened := make([]*Postgres, 3)
	errs := make([]error, 3)
	for i := range opened {
		wg.Add(1)
		go func() { defer wg.Done(); opened[i], errs[i] = OpenPostgres(dsn) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer opened[i].Close()
	}
	p := opened[0]
	var rows, version int
	if err := p.pool.QueryRow(context.Background(), `SELECT count(*), max(version) FROM schema_version`).Scan(&rows, &version); err != nil {
		t.Fatal(err)
	}
	if rows != version || version < 1 {
		t.Fatalf("schema_version: %d rows, version %d", rows, version)
	}
	if _, err := p.pool.Exec(context.Background(), `INSERT INTO schema_version (version, name) VALUES (999, 'future')`); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPostgres(dsn); err == nil || !strings.Contains(err.Error(), "schema version 999") {
		t.Fatalf("a newer schema: %v", err)
	}
}

// migrate records a file's position in the sorted list as its version, so the numbers in the
// names must run 1, 2, 3 ... without a gap or a repeat: two branches that each added "their"
// next number would otherwise record a database's version wrongly once merged.
func TestMigrationFilesNumberedByPosition(t *testing.T) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	for i, name := range names {
		want := fmt.Sprintf("migrations/%03d_", i+1)
		if !strings.HasPrefix(name, want) {
			t.Errorf("migration %d is %s: name it %s...", i+1, name, want)
		}
	}
}
