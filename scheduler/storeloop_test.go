package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
)

// stepWatchSink holds the image of job "short" (made by the first step, beside job "long"'s
// images) in Image until the engine has made a second step: writing an image must not stop
// the batch. An engine that waited for its images to be stored would never make it (the test
// fails after its timeout).
type stepWatchSink struct {
	*sink
	steps  *atomic.Int64
	held   atomic.Bool
	failed atomic.Bool
}

func (k *stepWatchSink) Images(b []JobImage) []error { return EachImage(b, k.Image) }

func (k *stepWatchSink) Image(id string, img generation.Image) error {
	if id == "short" && k.held.CompareAndSwap(false, true) {
		deadline := time.Now().Add(10 * time.Second)
		for k.steps.Load() < 2 {
			if time.Now().After(deadline) {
				k.failed.Store(true)
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return k.sink.Image(id, img)
}

func TestEngineStepsWhileImagesAreStored(t *testing.T) {
	models, _ := generation.TestModels()
	var steps atomic.Int64
	k := &stepWatchSink{sink: newSink(), steps: &steps}
	var first atomic.Int64
	s := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 8, OnStep: func(_ string, n int) {
		first.CompareAndSwap(0, int64(n))
		steps.Add(1)
	}})
	release := s.Hold()
	short := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 1, Seed: u64(1), Mode: "target", NumIter: ip(1)})
	long := plan(t, api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Seed: u64(2), Mode: "target", NumIter: ip(6)})
	for id, p := range map[string]generation.Plan{"short": short, "long": long} {
		if err := s.Submit(Job{ID: id, Plan: p}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	k.wait(t, 2)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if first.Load() != 3 {
		t.Fatalf("the first step had %d images, want both jobs' 3", first.Load())
	}
	if k.failed.Load() {
		t.Fatal("the engine did not step while an image was being stored")
	}
	for id, n := range map[string]int{"short": 1, "long": 2} {
		if err := k.finished[id]; err != nil || len(k.images[id]) != n {
			t.Errorf("%s: %d images, %v", id, len(k.images[id]), err)
		}
	}
}
