package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
)

// sink records what the scheduler reports.
type sink struct {
	mu       sync.Mutex
	images   map[string]map[int]generation.Image
	finished map[string]error
	ends     map[string]int
	done     chan string
	block    chan struct{} // when set, Image waits on it (to hold a job mid-run)
	failOn   string        // Image fails for this job
	progress map[string][]api.Progress
	batches  [][]JobImage // what each Images call carried
}

func newSink() *sink {
	return &sink{images: map[string]map[int]generation.Image{}, finished: map[string]error{}, ends: map[string]int{}, done: make(chan string, 100)}
}

func (k *sink) Started(string, time.Time) {}
func (k *sink) Progress(id string, p api.Progress) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.progress == nil {
		k.progress = map[string][]api.Progress{}
	}
	k.progress[id] = append(k.progress[id], p)
}
func (k *sink) Image(id string, img generation.Image) error {
	if k.block != nil {
		<-k.block
	}
	if id == k.failOn {
		return errors.New("disk full")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.images[id] == nil {
		k.images[id] = map[int]generation.Image{}
	}
	if _, dup := k.images[id][img.Index]; dup {
		panic(fmt.Sprintf("image %d of %s delivered twice", img.Index, id))
	}
	k.images[id][img.Index] = img
	return nil
}
func (k *sink) Images(b []JobImage) []error {
	k.mu.Lock()
	k.batches = append(k.batches, slices.Clone(b))
	k.mu.Unlock()
	return EachImage(b, k.Image)
}
func (k *sink) Finished(id string, err error) {
	k.mu.Lock()
	k.finished[id] = err
	k.ends[id]++
	k.mu.Unlock()
	k.done <- id
}

func (k *sink) wait(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-k.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d jobs finished", i, n)
		}
	}
}

func plan(t *testing.T, req api.GenerateRequest) generation.Plan {
	t.Helper()
	_, cat := generation.TestModels()
	p, err := generation.Validate(req, cat)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func u64(v uint64) *uint64   { return &v }
func f64(v float64) *float64 { return &v }
func ip(v int) *int          { return &v }

// Concurrent jobs of every mode, merged into shared engines, give the same pixels as each
// plan run alone, each image exactly once, and batches bigger than any single job's.
// With lanes (one group's images split over engines stepped side by side) every image is
// still the one its plan makes alone.
func TestMergedJobsMatchRunAlone(t *testing.T) {
	for _, lanes := range []int{1, 3} {
		t.Run(fmt.Sprint(lanes, "lanes"), func(t *testing.T) { mergedJobsMatchRunAlone(t, lanes) })
	}
}

func mergedJobsMatchRunAlone(t *testing.T, lanes int) {
	models, _ := generation.TestModels()
	k := newSink()
	var mu sync.Mutex
	maxBatch := 0
	s := New(Config{Models: models, Sink: k, QueueSize: 16, MaxBatch: 8 * lanes, Lanes: lanes, OnStep: func(_ string, n int) {
		mu.Lock()
		maxBatch = max(maxBatch, n)
		mu.Unlock()
	}})
	reqs := []api.GenerateRequest{
		{Class: api.Classes{"0"}, N: 3, Seed: u64(1), Mode: "target"},
		{Class: api.Classes{"all"}, N: 1, Seed: u64(2), Mode: "target", CFG: f64(3), NumIter: ip(3)},
		{Class: api.Classes{"1"}, N: 2, Seed: u64(1), Mode: "draft", Temperature: f64(0.7)},
		{Class: api.Classes{"2"}, N: 4, Seed: u64(5), Mode: "spec"},
		{Class: api.Classes{"2", "0"}, N: 2, Seed: u64(5), Mode: "spec"}, // same engine as the previous, overlapping images
		{Class: api.Classes{"0", "1"}, N: 2, Seed: u64(9), Mode: "spec"}, // same engine, another seed
		{Class: api.Classes{"1"}, N: 2, Seed: u64(0), Mode: "spec"},      // seed 0: an engine of its own
		{Class: api.Classes{"1"}, N: 2, Seed: u64(6), Mode: "spec", Gamma: "auto"},
		{Class: api.Classes{"0"}, N: 3, Seed: u64(1), Mode: "target", Preset: ""},
	}
	plans := map[string]generation.Plan{}
	release := s.Hold() // every job queued before any runs, so merging does not hang on timing
	for i, r := range reqs {
		id := fmt.Sprint("job", i)
		plans[id] = plan(t, r)
		if err := s.Submit(Job{ID: id, Plan: plans[id]}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	k.wait(t, len(reqs))
	for id, p := range plans {
		if err := k.finished[id]; err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		batch := 1 // one image at a time: nothing shared with any other image
		if p.Spec != nil && p.Spec.AutoGamma {
			batch = 0 // auto gamma adapts to its batch: it runs alone, with all its images at once
		}
		want, err := generation.Run(t.Context(), p, models, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(k.images[id]) != len(want) {
			t.Fatalf("%s: %d images, want %d", id, len(k.images[id]), len(want))
		}
		for _, w := range want {
			got := k.images[id][w.Index]
			if !slices.Equal(got.Pixels, w.Pixels) || got.Class != w.Class {
				t.Errorf("%s image %d differs from the plan run alone", id, w.Index)
			}
			if (w.Spec == nil) != (got.Spec == nil) || (w.Spec != nil && w.Spec.Accepted != got.Spec.Accepted) {
				t.Errorf("%s image %d: statistics differ", id, w.Index)
			}
		}
		if k.ends[id] != 1 {
			t.Errorf("%s finished %d times", id, k.ends[id])
		}
	}
	if lanes == 1 && maxBatch <= 4 { // lanes split a batch (TestLanesSpreadImages)
		t.Errorf("largest batch %d: jobs were not merged", maxBatch)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestQueueFullCancelAndShutdown(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	k.block = make(chan struct{})
	s := New(Config{Models: models, Sink: k, QueueSize: 2, MaxBatch: 4})
	p := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Seed: u64(1), Mode: "target"})
	if err := s.Submit(Job{ID: "a", Plan: p}); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(Job{ID: "a", Plan: p}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate id: %v", err)
	}
	if err := s.Submit(Job{ID: "b", Plan: p}); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(Job{ID: "c", Plan: p}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third job in a queue of 2: %v", err)
	}
	if !s.Cancel("b") || s.Cancel("nope") {
		t.Fatal("Cancel reports wrongly")
	}
	close(k.block) // let "a" store its images
	k.wait(t, 2)
	if k.finished["a"] != nil || !errors.Is(k.finished["b"], ErrCancelled) {
		t.Fatalf("a: %v, b: %v", k.finished["a"], k.finished["b"])
	}
	if len(k.images["b"]) == 2 {
		t.Error("the cancelled job was completed")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(Job{ID: "d", Plan: p}); !errors.Is(err, ErrClosed) {
		t.Fatalf("submit after shutdown: %v", err)
	}
}

// A job still running at Shutdown gets no Finished call (it stays resumable), and resuming it
// with the images already made skips them and makes exactly the rest.
func TestShutdownLeavesJobsAndResumeSkipsDone(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	k.block = make(chan struct{})
	s := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 2})
	p := plan(t, api.GenerateRequest{Class: api.Classes{"1"}, N: 5, Seed: u64(3), Mode: "target"})
	if err := s.Submit(Job{ID: "x", Plan: p}); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(50 * time.Millisecond); close(k.block) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ended := k.finished["x"]; ended {
		t.Fatal("a job interrupted by shutdown was reported finished")
	}
	made := len(k.images["x"])
	if made == 5 {
		t.Fatal("shutdown did not interrupt the job")
	}
	doneSet := map[int]bool{}
	for i := range k.images["x"] {
		doneSet[i] = true
	}
	s2 := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 2})
	if err := s2.Submit(Job{ID: "x", Plan: p, Done: doneSet}); err != nil {
		t.Fatal(err)
	}
	k.wait(t, 1)
	if len(k.images["x"]) != 5 || k.finished["x"] != nil {
		t.Fatalf("after resume: %d images, %v", len(k.images["x"]), k.finished["x"])
	}
	want, _ := generation.Run(t.Context(), p, models, 0)
	for _, w := range want {
		if !slices.Equal(k.images["x"][w.Index].Pixels, w.Pixels) {
			t.Errorf("image %d differs after resume", w.Index)
		}
	}
	_ = s2.Shutdown(context.Background())
}

func TestStoreFailureFailsJobOnly(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	k.failOn = "bad"
	s := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 8})
	p := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Seed: u64(1), Mode: "target"})
	_ = s.Submit(Job{ID: "bad", Plan: p})
	_ = s.Submit(Job{ID: "good", Plan: p})
	k.wait(t, 2)
	if k.finished["bad"] == nil || k.finished["good"] != nil || len(k.images["good"]) != 2 {
		t.Fatalf("bad: %v, good: %v (%d images)", k.finished["bad"], k.finished["good"], len(k.images["good"]))
	}
	_ = s.Shutdown(context.Background())
}

// With Isolate an engine never holds images of two jobs (no step bigger than one job), and
// the images are the same as merged ones.
func TestIsolateRunsOneJobAtATime(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	var mu sync.Mutex
	largest := 0
	s := New(Config{Models: models, Sink: k, QueueSize: 8, MaxBatch: 8, Isolate: true, OnStep: func(_ string, n int) {
		mu.Lock()
		largest = max(largest, n)
		mu.Unlock()
	}})
	plans := map[string]generation.Plan{}
	for i := 0; i < 4; i++ {
		id := fmt.Sprint("iso", i)
		plans[id] = plan(t, api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Seed: u64(uint64(i)), Mode: "target"})
		if err := s.Submit(Job{ID: id, Plan: plans[id]}); err != nil {
			t.Fatal(err)
		}
	}
	k.wait(t, 4)
	if largest != 2 {
		t.Errorf("largest step %d images, want 2 (one job of 2 images at a time)", largest)
	}
	for id, p := range plans {
		want, err := generation.Run(t.Context(), p, models, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !slices.Equal(k.images[id][w.Index].Pixels, w.Pixels) {
				t.Errorf("%s image %d differs", id, w.Index)
			}
		}
	}
	_ = s.Shutdown(context.Background())
}

// Spec jobs that differ only in their seed share an engine (each image brings its seed);
// seed 0, other settings, and auto gamma do not.
func TestGroupKeys(t *testing.T) {
	key := func(id string, r api.GenerateRequest) string { p := plan(t, r); return groupKey(id, &p) }
	spec := func(seed uint64) api.GenerateRequest {
		return api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(seed), Mode: "spec"}
	}
	if key("a", spec(5)) != key("b", spec(9)) {
		t.Error("spec jobs with different seeds are kept apart")
	}
	if key("a", spec(5)) == key("b", spec(0)) {
		t.Error("a seed-0 spec job shares an engine whose seed is another")
	}
	other := spec(5)
	other.Gamma = "4"
	if key("a", spec(5)) == key("b", other) {
		t.Error("different gamma, same engine")
	}
	auto := spec(5)
	auto.Gamma = "auto"
	if key("a", auto) == key("b", auto) {
		t.Error("auto gamma jobs share an engine")
	}
	if key("a", api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1), Mode: "target"}) !=
		key("b", api.GenerateRequest{Class: api.Classes{"1"}, Seed: u64(2), Mode: "target", CFG: f64(2)}) {
		t.Error("target jobs with different options are kept apart")
	}
	// a precision is a set of graphs: an engine runs one
	for _, r := range []api.GenerateRequest{{Class: api.Classes{"0"}, Seed: u64(1), Mode: "target"}, spec(5)} {
		p := plan(t, r)
		q := p
		q.Precision = "int8"
		if groupKey("a", &p) == groupKey("b", &q) {
			t.Errorf("mode %s: fp32 and int8 jobs share an engine", r.Mode)
		}
		// int8 rows are independent of their batch-mates: int8 jobs merge like fp32 ones
		if groupKey("a", &q) != groupKey("b", &q) {
			t.Errorf("mode %s: two int8 jobs are kept apart", r.Mode)
		}
	}
}

// Progress counts tokens while images are unfinished, for every mode: a job's reports climb
// to the total without going back.
func TestProgressCountsTokens(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	s := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 8})
	reqs := map[string]api.GenerateRequest{
		"spec":   {Class: api.Classes{"0"}, N: 2, Seed: u64(1), Mode: "spec", Gamma: "1"},
		"target": {Class: api.Classes{"1"}, N: 2, Seed: u64(1), Mode: "target"},
	}
	for id, r := range reqs {
		if err := s.Submit(Job{ID: id, Plan: plan(t, r)}); err != nil {
			t.Fatal(err)
		}
	}
	k.wait(t, len(reqs))
	for id := range reqs {
		reports := k.progress[id]
		partial, last := false, 0
		for _, p := range reports {
			if p.TokensDone < last {
				t.Errorf("%s: progress went back: %+v", id, reports)
			}
			last = p.TokensDone
			partial = partial || (p.ImagesDone == 0 && p.TokensDone > 0)
		}
		if !partial || last != reports[len(reports)-1].TokensTotal {
			t.Errorf("%s: no token progress before the first image, or not complete: %+v", id, reports)
		}
	}
	_ = s.Shutdown(context.Background())
}

func TestHoldKeepsJobsQueuedUntilReleased(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	s := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 4})
	defer s.Shutdown(context.Background())
	release := s.Hold()
	p := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Seed: u64(1), Mode: "target"})
	if err := s.Submit(Job{ID: "held", Plan: p}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // an analytic image takes about a millisecond
	k.mu.Lock()
	made := len(k.images["held"])
	k.mu.Unlock()
	if made != 0 {
		t.Fatalf("%d images made while the scheduler was held", made)
	}
	release()
	release() // a second call does nothing
	k.wait(t, 1)
	if err := k.finished["held"]; err != nil || len(k.images["held"]) != 2 {
		t.Fatalf("after release: err %v, %d images", err, len(k.images["held"]))
	}
}
