package scheduler

import (
	"context"
	"testing"

	"marspec/api"
	"marspec/generation"
)

// The images one engine step finishes reach the sink in one call, each job's in index order,
// so that a sink can write them side by side (a store behind a network waits per write).
func TestStepImagesReachTheSinkTogether(t *testing.T) {
	models, _ := generation.TestModels()
	k := newSink()
	s := New(Config{Models: models, Sink: k, QueueSize: 4, MaxBatch: 8})
	release := s.Hold()
	for id, n := range map[string]int{"a": 3, "b": 2} {
		p := plan(t, api.GenerateRequest{Class: api.Classes{"1"}, N: n, Seed: u64(7), Mode: "target", NumIter: ip(2)})
		if err := s.Submit(Job{ID: id, Plan: p}); err != nil {
			t.Fatal(err)
		}
	}
	release() // both jobs join the same first step, so their images finish in the same step
	k.wait(t, 2)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.batches) != 1 || len(k.batches[0]) != 5 {
		sizes := []int{}
		for _, b := range k.batches {
			sizes = append(sizes, len(b))
		}
		t.Fatalf("the sink got batches of %v images, want one of 5", sizes)
	}
	next := map[string]int{}
	for _, im := range k.batches[0] {
		if im.Image.Index != next[im.Job] {
			t.Fatalf("job %s: image %d came where %d was due (a job's images in index order)", im.Job, im.Image.Index, next[im.Job])
		}
		next[im.Job]++
	}
	for id, err := range k.finished {
		if err != nil {
			t.Errorf("job %s: %v", id, err)
		}
	}
}
