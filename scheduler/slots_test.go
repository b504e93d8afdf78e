package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
)

// inFlight counts the images in the engines of every group: those admitted and neither
// delivered nor dropped with their job.
func inFlight(s *Scheduler) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.jobs {
		if !r.ending {
			n += r.inFlight
		}
	}
	return n
}

// competing are requests of five engine groups: target mode, draft mode, spec, spec with
// seed 0, and auto gamma (a group of its own per job).
func competing(i int) api.GenerateRequest {
	seed := u64(uint64(i + 1))
	switch i % 5 {
	case 0:
		return api.GenerateRequest{Class: api.Classes{"0"}, N: 3 + i%4, Seed: seed, Mode: "target"}
	case 1:
		return api.GenerateRequest{Class: api.Classes{"1"}, N: 2 + i%3, Seed: seed, Mode: "draft"}
	case 2:
		return api.GenerateRequest{Class: api.Classes{"2", "0"}, N: 4, Seed: seed, Mode: "spec"}
	case 3:
		return api.GenerateRequest{Class: api.Classes{"1"}, N: 3, Seed: u64(0), Mode: "spec"}
	default:
		return api.GenerateRequest{Class: api.Classes{"0"}, N: 7, Seed: seed, Mode: "spec", Gamma: "auto"}
	}
}

// Jobs of five engine groups compete for three slots: images in flight in all engines never
// pass MaxBatch, every job ends (none waits for ever on another group), a cancelled one
// included, merged images equal images made alone, and a job whose group is its own runs the
// batches it runs alone.
func TestOneBoundAcrossGroups(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	const maxBatch = 3
	var mu sync.Mutex
	most, over := 0, 0
	batches := map[string][]int{} // per group: the size of each step
	var s *Scheduler
	s = New(Config{Models: models, Sink: k, QueueSize: 32, MaxBatch: maxBatch, OnStep: func(group string, n int) {
		now := inFlight(s)
		mu.Lock()
		defer mu.Unlock()
		most = max(most, now)
		if now > maxBatch {
			over++
		}
		batches[group] = append(batches[group], n)
	}})
	plans := map[string]generation.Plan{}
	release := s.Hold()
	for i := range 20 {
		id := fmt.Sprint("job", i)
		plans[id] = plan(t, competing(i))
		if err := s.Submit(Job{ID: id, Plan: plans[id]}); err != nil {
			t.Fatal(err)
		}
	}
	s.Cancel("job7")
	release()
	k.wait(t, len(plans))
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if over > 0 || most != maxBatch {
		t.Errorf("images in flight reached %d (%d steps over the bound of %d)", most, over, maxBatch)
	}
	groups := map[string]bool{}
	for id, p := range plans {
		groups[groupKey(id, &p)] = true
		if id == "job7" {
			continue
		}
		if err := k.finished[id]; err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if alone(&p) {
			want := runAlone(t, p, maxBatch)
			if got := batches[groupKey(id, &p)]; !slices.Equal(got, want.batches) {
				t.Errorf("%s runs alone in steps of %v, among others %v", id, want.batches, got)
			}
			for i, img := range want.images {
				if !slices.Equal(k.images[id][i].Pixels, img.Pixels) {
					t.Errorf("%s image %d differs from its run alone", id, i)
				}
			}
			continue
		}
		want, err := generation.Run(t.Context(), p, models, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !slices.Equal(k.images[id][w.Index].Pixels, w.Pixels) {
				t.Errorf("%s image %d differs from the plan run alone", id, w.Index)
			}
		}
	}
	if len(groups) < 5 {
		t.Fatalf("%d engine groups, want 5", len(groups))
	}
	if err := k.finished["job7"]; err != ErrCancelled {
		t.Errorf("cancelled job7 ended with %v", err)
	}
}

type aloneRun struct {
	batches []int
	images  map[int]generation.Image
}

// runAlone runs one job on a scheduler of its own.
func runAlone(t *testing.T, p generation.Plan, maxBatch int) aloneRun {
	t.Helper()
	models, _ := generation.TestModels()
	k := newSink()
	var out aloneRun
	s := New(Config{Models: models, Sink: k, MaxBatch: maxBatch, OnStep: func(_ string, n int) { out.batches = append(out.batches, n) }})
	if err := s.Submit(Job{ID: "alone", Plan: p}); err != nil {
		t.Fatal(err)
	}
	k.wait(t, 1)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	out.images = k.images["alone"]
	return out
}

// timedSink records when each job started, and holds the images of the jobs for which held
// is true until open is closed.
type timedSink struct {
	*sink
	mu      sync.Mutex
	at      map[string]time.Time
	started chan string
	held    func(id string) bool
	open    chan struct{}
}

func (k *timedSink) Started(id string, at time.Time) {
	k.mu.Lock()
	k.at[id] = at
	k.mu.Unlock()
	k.started <- id
}

func (k *timedSink) Images(b []JobImage) []error { return EachImage(b, k.Image) }

func (k *timedSink) Image(id string, img generation.Image) error {
	if k.held(id) {
		<-k.open
	}
	return k.sink.Image(id, img)
}

// A job of the highest rank posted behind twenty queued jobs of four groups starts before
// every job that had not started when it was posted, although its own group is busy (its
// images are held in the sink) and other groups have free slots meanwhile.
func TestRankOrdersTheWholeQueue(t *testing.T) {
	models, _ := generation.TestModels()
	k := &timedSink{sink: newSink(), at: map[string]time.Time{}, started: make(chan string, 64), open: make(chan struct{})}
	plans := map[string]generation.Plan{}
	k.held = func(id string) bool { return plans[id].Spec == nil && plans[id].Mode == "target" }
	s := New(Config{Models: models, Sink: k, QueueSize: 32, MaxBatch: 4})
	defer s.Shutdown(context.Background()) //nolint:errcheck
	t0 := time.Now()
	release := s.Hold()
	for i := range 20 {
		id := fmt.Sprint("low", i)
		plans[id] = plan(t, competing(i%4)) // target, draft, spec, spec seed 0 in turn
		if err := s.Submit(Job{ID: id, Plan: plans[id], Rank: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	plans["high"] = plan(t, competing(0)) // the group of low0, whose images are held
	release()
	for id := range k.started {
		if id == "low0" {
			break
		}
	}
	if err := s.Submit(Job{ID: "high", Plan: plans["high"], Rank: t0.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	posted := time.Now()
	// Other groups have slots to free while low0 is held: give them time to take one.
	timer := time.After(300 * time.Millisecond)
wait:
	for {
		select {
		case <-timer:
			break wait
		case id := <-k.started:
			k.mu.Lock()
			late := k.at[id].After(posted)
			k.mu.Unlock()
			if late {
				break wait // the order is checked below
			}
		}
	}
	close(k.open)
	k.wait(t, 21)
	k.mu.Lock()
	defer k.mu.Unlock()
	queued := 0
	for id, at := range k.at {
		if id == "high" || !at.After(posted) {
			continue
		}
		queued++
		if at.Before(k.at["high"]) {
			t.Errorf("%s, queued when high was posted, started before it", id)
		}
	}
	if queued < 10 {
		t.Errorf("only %d jobs were still queued when high was posted", queued)
	}
}
