package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
)

// startSink is a sink that also records the order jobs start in.
type startSink struct {
	*sink
	mu     sync.Mutex
	starts []string
}

func (k *startSink) Started(id string, _ time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.starts = append(k.starts, id)
}

// A job of higher rank posted behind many others takes the next free slot: images in flight
// keep theirs, and nothing queued before it starts first.
func TestRankOrdersFreeSlots(t *testing.T) {
	models, _ := generation.TestModels()
	k := &startSink{sink: newSink()}
	s := New(Config{Models: models, Sink: k, QueueSize: 200, MaxBatch: 4})
	p := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 1, Seed: u64(1), Mode: "target"})
	t0 := time.Now()
	release := s.Hold()
	for i := range 100 {
		if err := s.Submit(Job{ID: fmt.Sprint("low", i), Plan: p, Rank: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Submit(Job{ID: "high", Plan: p, Rank: t0.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(Job{ID: "equal", Plan: p, Rank: t0}); err != nil { // same rank as low0: after it
		t.Fatal(err)
	}
	release()
	k.wait(t, 102)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.starts[0] != "high" {
		t.Fatalf("first started: %v", k.starts[:5])
	}
	if i, j := slices.Index(k.starts, "low0"), slices.Index(k.starts, "equal"); i > j {
		t.Errorf("equal ranks: %s started before low0 (%d, %d)", "equal", j, i)
	}
	for i := 1; i < 100; i++ {
		if slices.Index(k.starts, fmt.Sprint("low", i-1)) > slices.Index(k.starts, fmt.Sprint("low", i)) {
			t.Fatalf("low%d started before low%d", i, i-1)
		}
	}
}

// A job not started by its deadline ends with ErrQueueDeadline: by Expire while its worker is
// held, and at admission; a job that started is never ended by its deadline.
func TestQueueDeadline(t *testing.T) {
	models, _ := generation.TestModels()
	k := &startSink{sink: newSink()}
	s := New(Config{Models: models, Sink: k, QueueSize: 10, MaxBatch: 1})
	p := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Seed: u64(1), Mode: "target"})
	k.block = make(chan struct{})
	if err := s.Submit(Job{ID: "running", Plan: p, Deadline: time.Now().Add(50 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	for {
		k.mu.Lock()
		n := len(k.starts)
		k.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Submit(Job{ID: "waiting", Plan: p, Deadline: time.Now().Add(50 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := s.Expire(time.Now()); len(got) != 1 || got[0] != "waiting" {
		t.Fatalf("expired %v, want the waiting job only", got)
	}
	if !errors.Is(k.finished["waiting"], ErrQueueDeadline) || s.Has("waiting") {
		t.Fatalf("waiting job: %v (still held: %v)", k.finished["waiting"], s.Has("waiting"))
	}
	if err := s.Submit(Job{ID: "late", Plan: p, Deadline: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	close(k.block)
	k.wait(t, 3)
	if k.finished["running"] != nil || !errors.Is(k.finished["late"], ErrQueueDeadline) {
		t.Fatalf("running: %v, late: %v", k.finished["running"], k.finished["late"])
	}
	if len(k.images["late"]) != 0 {
		t.Error("an expired job made images")
	}
}
