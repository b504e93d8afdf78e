package scheduler

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
)

// The rate is tokens over seconds, and the time left the time so far scaled by the work left
// against the work done; with no token decoded, no work done or no time passed neither is
// given.
func TestWithRate(t *testing.T) {
	p := api.Progress{TokensDone: 30, TokensTotal: 100}
	withRate(&p, 20, 0.5, 1.5, 4*time.Second)
	if p.TokensPerSecond == nil || *p.TokensPerSecond != 5 || p.SecondsLeft == nil || *p.SecondsLeft != 12 {
		t.Errorf("rate %v, left %v; want 5 tokens/s and 12 s", p.TokensPerSecond, p.SecondsLeft)
	}
	for _, c := range []struct {
		tokens  int
		did     float64
		elapsed time.Duration
	}{{0, 0.5, time.Second}, {5, 0.5, 0}, {5, 0, time.Second}} {
		p := api.Progress{TokensDone: 30, TokensTotal: 100}
		withRate(&p, c.tokens, c.did, 1, c.elapsed)
		if p.TokensPerSecond != nil || p.SecondsLeft != nil {
			t.Errorf("%+v: rate %v, left %v; want none", c, p.TokensPerSecond, p.SecondsLeft)
		}
	}
}

// A job's progress reports carry its rate since it started, on the scheduler's clock (here
// 10 s pass between the start and every report): a resumed job's earlier images are left out
// of it, so its rate is this run's tokens over the time, and the time left is the tokens
// left at that rate.
func TestProgressHasTheRateSinceTheStart(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	s := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 8})
	defer s.Shutdown(context.Background())
	var mu sync.Mutex
	start, calls := time.Unix(1000, 0), 0
	s.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return start
		}
		return start.Add(10 * time.Second)
	}
	p := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 3, Seed: u64(1), Mode: "target"})
	if err := s.Submit(Job{ID: "resumed", Plan: p, Done: map[int]bool{0: true}}); err != nil {
		t.Fatal(err)
	}
	k.wait(t, 1)
	k.mu.Lock()
	reports := k.progress["resumed"]
	k.mu.Unlock()
	base := p.SeqLen
	if len(reports) == 0 {
		t.Fatal("no progress")
	}
	for _, r := range reports {
		if r.TokensDone <= base {
			if r.TokensPerSecond != nil {
				t.Errorf("%+v: a rate before this run decoded a token", r)
			}
			continue
		}
		want := float64(r.TokensDone-base) / 10
		if r.TokensPerSecond == nil || math.Abs(*r.TokensPerSecond-want) > 1e-9 {
			t.Fatalf("%d of %d tokens done, %d before the start: rate %v, want %v", r.TokensDone, r.TokensTotal, base, r.TokensPerSecond, want)
		}
		if left := float64(r.TokensTotal-r.TokensDone) / want; r.SecondsLeft == nil || math.Abs(*r.SecondsLeft-left) > 1e-9 {
			t.Errorf("%+v: seconds left %v, want %v", r, r.SecondsLeft, left)
		}
	}
	if last := reports[len(reports)-1]; last.SecondsLeft == nil || *last.SecondsLeft != 0 {
		t.Errorf("the last report leaves %v s, want 0", last.SecondsLeft)
	}
}

// A resumed job waiting for a slot behind another of its group has tokens (its earlier
// images) but no start: its reports carry no rate until it starts.
func TestNoRateBeforeTheStart(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	s := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 1})
	defer s.Shutdown(context.Background())
	release := s.Hold()
	first := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Seed: u64(1), Mode: "target"})
	resumed := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Seed: u64(2), Mode: "target"})
	if err := s.Submit(Job{ID: "first", Plan: first}); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(Job{ID: "resumed", Plan: resumed, Done: map[int]bool{0: true}}); err != nil {
		t.Fatal(err)
	}
	release()
	k.wait(t, 2)
	k.mu.Lock()
	defer k.mu.Unlock()
	waiting := 0
	for _, r := range k.progress["resumed"] {
		if r.TokensDone == resumed.SeqLen { // nothing of this run yet: waiting, or just admitted
			waiting++
			if r.TokensPerSecond != nil {
				t.Errorf("a rate before the job decoded a token: %+v", r)
			}
		}
	}
	if waiting == 0 {
		t.Fatal("the resumed job was never reported while it waited (one slot, taken by the first job)")
	}
}
