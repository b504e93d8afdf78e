package server

import (
	"errors"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
	"marspec/store/storetest"
)

// hiccupPostgres fails the first reads of a job once it has ended, as a shared database does
// for a moment after an outage (the runner's final write went through, a reader's pooled
// connection is still cut). It embeds the PostgreSQL store itself, so the server still sees a
// shared queue and runs as a replica.
type hiccupPostgres struct {
	*store.Postgres
	mu    sync.Mutex
	fails int
}

func (m *hiccupPostgres) Job(id string) (store.Job, error) {
	j, err := m.Postgres.Job(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil && j.Status != api.StatusQueued && j.Status != api.StatusRunning && m.fails > 0 {
		m.fails--
		return store.Job{}, &store.UnavailableError{Store: "database", Cause: "connection lost", Err: errors.New("conn closed")}
	}
	return j, err
}

// A replica's stream whose job ends while the shared store cannot be read still ends with
// "done" and the finished job once the store answers again: the client must not see a stream
// that looks cut by a shutdown.
func TestEventsRideOutAStoreHiccupAtTheEnd(t *testing.T) {
	pg, err := store.OpenPostgres(storetest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := store.NewFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	meta := &hiccupPostgres{Postgres: pg, fails: 3}
	cfg := testConfig()
	cfg.Lease = 2 * time.Second // retried for half of it: 50 + 100 + 200 ms cover the three failures
	ts := startWith(t, store.New(meta, blobs), "", true, cfg)
	if ts.rep == nil {
		t.Fatal("the server over PostgreSQL must run as a replica")
	}
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Mode: "target", Seed: seed(5)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	final, err := ts.client.Events(t.Context(), g.ID, func(ev api.Event) error {
		if ev.Type == "generation" {
			ts.gate.release()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the stream ended without the finished job: %v", err)
	}
	if final.Status != api.StatusSucceeded || len(final.Images) != 2 {
		t.Errorf("final %s with %d images, want succeeded with 2", final.Status, len(final.Images))
	}
	meta.mu.Lock()
	defer meta.mu.Unlock()
	if meta.fails != 0 {
		t.Errorf("%d failures left: the stream never met the hiccup, so the test tested nothing", meta.fails)
	}
}
