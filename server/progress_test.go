package server

import (
	"io"
	"sync"
	"testing"

	"marspec/api"
	"marspec/generation"
	"marspec/mar"
	"marspec/store"
)

// pausingTransformer stops at its pass number at (counted from 1) until resume is closed,
// having closed entered: the test looks at the job while an image is half made.
type pausingTransformer struct {
	mar.Transformer
	at      int
	mu      sync.Mutex
	passes  int
	entered chan struct{}
	resume  chan struct{}
}

func (p *pausingTransformer) Forward(tokens, mask []float32, classIDs []int64, drop []float32, batch int, z []float32) error {
	p.mu.Lock()
	p.passes++
	stop := p.passes == p.at
	p.mu.Unlock()
	if stop {
		close(p.entered)
		<-p.resume
	}
	return p.Transformer.Forward(tokens, mask, classIDs, drop, batch, z)
}

// A job's progress climbs inside its image, for the stepper (target mode) and the speculative
// engine alike: while its only image is half made, GET shows tokens decoded and none of its
// images done, with the rate and the time left; at the end every token, and no rate.
func TestProgressInsideAnImage(t *testing.T) {
	one := 0 // target mode: one token per AR step
	for _, req := range []api.GenerateRequest{
		{Class: api.Classes{"0"}, Mode: "target", NumIter: &one},
		{Class: api.Classes{"0"}, Mode: "spec", Gamma: "1"},
	} {
		models, _ := generation.TestModels()
		target := *models["target"]
		pause := &pausingTransformer{Transformer: target.Transformer, at: 3, entered: make(chan struct{}), resume: make(chan struct{})}
		target.Transformer = pause
		models["target"] = &target
		dir := t.TempDir()
		st, err := store.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		ts := startModels(t, st, dir, false, testConfig(), io.Discard, models)
		g, err := ts.client.Generate(t.Context(), req, 0)
		if err != nil {
			t.Fatal(err)
		}
		<-pause.entered
		mid, err := ts.client.Generation(t.Context(), g.ID)
		close(pause.resume)
		if err != nil {
			t.Fatal(err)
		}
		p := mid.Progress
		if p.ImagesDone != 0 || p.TokensDone <= 0 || p.TokensDone >= p.TokensTotal || p.Fraction != float64(p.TokensDone)/float64(p.TokensTotal) {
			t.Errorf("%s: progress inside the image %+v, want tokens done between 0 and %d, no image done", req.Mode, p, p.TokensTotal)
		}
		// the rate and the time left come with it, while the job runs
		if p.TokensPerSecond == nil || *p.TokensPerSecond <= 0 || p.SecondsLeft == nil || *p.SecondsLeft <= 0 {
			t.Errorf("%s: progress inside the image without a rate and time left: %+v", req.Mode, p)
		}
		end := ts.waitEnd(t, g.ID)
		if end.Status != api.StatusSucceeded || end.Progress.TokensDone != end.Progress.TokensTotal || end.Progress.Fraction != 1 ||
			end.Progress.TokensPerSecond != nil || end.Progress.SecondsLeft != nil {
			t.Errorf("%s: at the end %s %+v", req.Mode, end.Status, end.Progress)
		}
	}
}
