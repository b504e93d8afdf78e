package server

import (
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
)

// slowJobRead is a shared store whose reads of one job hang for a while, as a database
// holding a row lock or slow to answer does.
type slowJobRead struct {
	*store.Postgres
	slow string
}

func (m *slowJobRead) Job(id string) (store.Job, error) {
	if id == m.slow {
		time.Sleep(3 * time.Second)
	}
	return m.Postgres.Job(id)
}

// The poll of watched jobs (a stream following a job elsewhere) runs apart from claiming: a
// read that hangs delays no claim. It ran inside the claim loop, one job after another.
func TestSlowWatchReadsDelayNoClaim(t *testing.T) {
	sh := newShared(t, "files")
	pg, err := store.OpenPostgres(sh.dsn)
	if err != nil {
		t.Fatal(err)
	}
	watched := "d0000000-0000-0000-0000-00000000000d"
	a := startWith(t, store.New(&slowJobRead{Postgres: pg, slow: watched}, sh.blobs(t)), "", false, testConfig())
	_, _, unwatch := a.hub.watch(watched)
	defer unwatch()
	time.Sleep(1200 * time.Millisecond) // the poll has begun reading the watched job
	began := time.Now()
	g, err := a.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, Mode: "draft", Seed: seed(6)}, 15*time.Second)
	if err != nil || g.Status != api.StatusSucceeded {
		t.Fatalf("%+v %v", g, err)
	}
	if took := time.Since(began); took > 1500*time.Millisecond {
		t.Errorf("a one-image job took %v while a watched job's read hung", took)
	} else {
		t.Logf("a one-image job took %v while a watched job's read hung", took)
	}
}
