package scheduler

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/mar"
	"marspec/mar/analytic"
)

// Under MAR's schedule (256 tokens in 64 AR steps: a token or two a step early, many late) with
// every step taking a second on the scheduler's clock, a running job's time left is its AR
// steps left (a second image's too, run after the first in the one slot), from its first
// steps on, where the tokens' rate puts it about four times too long.
func TestTimeLeftFollowsTheARSteps(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprint(n, "images"), func(t *testing.T) { timeLeftFollowsTheARSteps(t, n) })
	}
}

func timeLeftFollowsTheARSteps(t *testing.T, n int) {
	const L, steps = 256, 64
	m := analytic.New(analytic.Params{Name: "analytic-256", SeqLen: L, TokenDim: 1, Base: make([]float64, L), Scale: 0.01, Steps: 2, Classes: 1})
	cat := generation.Catalog{TargetPack: "target", Target: m.Manifest, MaxImages: 4, Provider: "cpu"}
	p, err := generation.Validate(api.GenerateRequest{Class: api.Classes{"0"}, N: n, Seed: u64(1), Mode: "target", NumIter: ip(steps)}, cat)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	stepped, start := 0, time.Unix(1000, 0)
	k := newSink()
	s := New(Config{Models: generation.Fixed{"target": m}, Sink: k, QueueSize: 1, MaxBatch: 1, OnStep: func(string, int) {
		mu.Lock()
		stepped++
		mu.Unlock()
	}})
	defer s.Shutdown(context.Background())
	s.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return start.Add(time.Duration(stepped) * time.Second)
	}
	if err := s.Submit(Job{ID: "j", Plan: p}); err != nil {
		t.Fatal(err)
	}
	k.wait(t, 1)
	after := map[int]int{} // tokens known -> AR steps run
	known := 0
	for i, n := range mar.StepSizes(L, steps) {
		known += n
		after[known] = i + 1
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	checked := 0
	for _, r := range k.progress["j"] {
		step, ok := after[r.TokensDone]
		if !ok || step == 0 || step > 8 || r.SecondsLeft == nil {
			continue
		}
		want := float64(n*steps - step)
		byTokens := float64(n*L-r.TokensDone) / (float64(r.TokensDone) / float64(step))
		if math.Abs(*r.SecondsLeft-want) > 0.25*want {
			t.Errorf("after AR step %d (%d tokens): %.1f s left, want %.0f (the tokens' rate says %.0f)", step, r.TokensDone, *r.SecondsLeft, want, byTokens)
		}
		if byTokens < 2.5*want {
			t.Errorf("after AR step %d: the tokens' rate says %.0f s left against %.0f: not the schedule this test is about", step, byTokens, want)
		}
		checked++
	}
	if checked < 4 {
		t.Fatalf("%d reports in the first 8 AR steps, want one a step: %+v", checked, k.progress["j"])
	}
}
