package scheduler

import (
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
)

// slowSink's Started and Finished wait until released, as a store write to a database that
// is away does.
type slowSink struct {
	*sink
	started, ending chan string
	release         chan struct{}
}

func (k *slowSink) Started(id string, _ time.Time) {
	k.started <- id
	<-k.release
}

func (k *slowSink) Finished(id string, err error) {
	k.ending <- id
	<-k.release
	k.sink.Finished(id, err)
}

// The sink's writes happen outside the scheduler's lock: while a Started or a Finished call
// waits on a slow store, Depth (the /metrics gauge), Has, Cancel and Submit answer at once.
func TestSinkCallsDoNotHoldTheLock(t *testing.T) {
	models, _ := generation.TestModels()
	k := &slowSink{sink: newSink(), started: make(chan string, 4), ending: make(chan string, 4), release: make(chan struct{})}
	s := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 4})
	defer s.Shutdown(t.Context()) //nolint:errcheck
	p := plan(t, api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Mode: "draft", Seed: u64(1)})
	if err := s.Submit(Job{ID: "a", Plan: p}); err != nil {
		t.Fatal(err)
	}
	answers := func(phase string) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Depth()
			s.Has("a")
			s.Backlog()
			s.Cancel("nobody")
		}()
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatalf("the scheduler's lock is held while the sink's %s waits", phase)
		}
	}
	select {
	case <-k.started:
	case <-time.After(10 * time.Second):
		t.Fatal("never started")
	}
	answers("Started")
	k.release <- struct{}{}
	select {
	case <-k.ending:
	case <-time.After(10 * time.Second):
		t.Fatal("never finished")
	}
	answers("Finished")
	if !s.Has("a") {
		t.Error("a job left the scheduler before its Finished returned (its id could be admitted again meanwhile)")
	}
	k.release <- struct{}{}
	k.wait(t, 1)
	if err := k.sink.finished["a"]; err != nil || len(k.images["a"]) != 2 {
		t.Fatalf("job a: %v with %d images", err, len(k.images["a"]))
	}
}

// A job whose end is being written no longer counts as queued: Depth leaves it out and a queue
// of one takes the next job, since a client answered by that write may post again at once
// (TestQueueFull in server met the old count as a 503 under load).
func TestEndingJobFreesItsSlot(t *testing.T) {
	models, _ := generation.TestModels()
	k := &slowSink{sink: newSink(), started: make(chan string, 4), ending: make(chan string, 4), release: make(chan struct{})}
	s := New(Config{Models: models, Sink: k, QueueSize: 1, MaxBatch: 4})
	defer s.Shutdown(t.Context()) //nolint:errcheck
	p := plan(t, api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "draft", Seed: u64(1)})
	if err := s.Submit(Job{ID: "a", Plan: p}); err != nil {
		t.Fatal(err)
	}
	<-k.started
	if err := s.Submit(Job{ID: "b", Plan: p}); err != ErrQueueFull {
		t.Fatalf("a second job while the first runs in a queue of one: %v, want ErrQueueFull", err)
	}
	k.release <- struct{}{}
	<-k.ending
	if d := s.Depth(); d != 0 {
		t.Errorf("depth %d while the only job's end is written, want 0", d)
	}
	releases, jobs := 1, 1 // a's Finished
	if err := s.Submit(Job{ID: "b", Plan: p}); err != nil {
		t.Errorf("a job while the first one's end is written: %v, want it queued", err)
	} else {
		releases, jobs = 3, 2 // and b's Started and Finished
	}
	for range releases {
		k.release <- struct{}{}
	}
	k.wait(t, jobs)
}
