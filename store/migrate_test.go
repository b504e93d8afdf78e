package store

import (
	"context"
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
