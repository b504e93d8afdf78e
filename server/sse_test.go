package server

import (
	"errors"
	"sync"
	"testing"

	"marspec/api"
	"marspec/store"
)

// hiccupMeta fails the first reads of a job once it has ended, as a shared database does for
// a moment after an outage (the runner's final write went through, a reader's connection is
// still cut).
type hiccupMeta struct {
	store.Meta
	mu    sync.Mutex
	fails int
}

func (m *hiccupMeta) Job(id string) (store.Job, error) {
	j, err := m.Meta.Job(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil && j.Status != api.StatusQueued && j.Status != api.StatusRunning && m.fails > 0 {
		m.fails--
		return store.Job{}, errors.New("conn closed")
	}
	return j, err
}

// A stream whose job ends while the store cannot be read still ends with "done" and the
// finished job, once the store answers again: the client must not see a stream that looks cut
// by a shutdown.
func TestEventsRideOutAStoreHiccupAtTheEnd(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	meta := &hiccupMeta{Meta: st.Meta, fails: 3}
	ts := startWith(t, store.New(meta, st.Blobs), dir, true, testConfig())
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
	if meta.fails != 0 {
		t.Errorf("%d failures left: the stream never met the hiccup, so the test tested nothing", meta.fails)
	}
}
