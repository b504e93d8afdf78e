// Package storetest starts the real servers the store tests run against: a fresh database on
// the local PostgreSQL, a versitygw S3 server. There are no in-memory fakes: a test that
// cannot reach the server is skipped with the reason, unless MARSPEC_REQUIRE_POSTGRES=1 or
// MARSPEC_REQUIRE_S3=1 (CI) makes it fail.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresAdmin is the server the tests use ($MARSPEC_TEST_POSTGRES overrides it).
func PostgresAdmin() string {
	if v := os.Getenv("MARSPEC_TEST_POSTGRES"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// unavailable skips (or fails, when env is "1") a test whose server is missing.
func unavailable(t testing.TB, env, what string, err error) {
	t.Helper()
	if os.Getenv(env) == "1" {
		t.Fatalf("%s: %v (required: %s=1)", what, err, env)
	}
	t.Skipf("%s: %v (set %s=1 to fail instead of skipping)", what, err, env)
}

// Postgres creates an empty database with a unique name, dropped when the test ends, and
// returns its URL.
func Postgres(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, PostgresAdmin())
	if err != nil {
		unavailable(t, "MARSPEC_REQUIRE_POSTGRES", "PostgreSQL at "+PostgresAdmin()+" is not reachable", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "marspec_test_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		admin.Close(ctx)
		t.Fatalf("creating test database: %v", err)
	}
	admin.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, PostgresAdmin())
		if err != nil {
			t.Logf("dropping %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Logf("dropping %s: %v", name, err)
		}
	})
	cfg, err := pgx.ParseConfig(PostgresAdmin())
	if err != nil {
		t.Fatal(err)
	}
	return "postgres://" + cfg.User + "@" + cfg.Host + ":" + strconv.Itoa(int(cfg.Port)) + "/" + name + "?sslmode=disable"
}

// Outage makes the database at dsn unreachable for d, as a server restart does to its
// clients: new connections are refused and every open one is cut. The shared server itself
// keeps running (other databases on it are not touched).
func Outage(t testing.TB, dsn string, d time.Duration) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.Database
	ctx, cancel := context.WithTimeout(context.Background(), d+10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, PostgresAdmin())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, sql := range []string{
		`ALTER DATABASE ` + name + ` ALLOW_CONNECTIONS false`,
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + name + `' AND pid <> pg_backend_pid()`,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(d)
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+name+` ALLOW_CONNECTIONS true`); err != nil {
		t.Fatal(err)
	}
}
