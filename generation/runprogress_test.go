package generation

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/mar"
	"marspec/progress"
)

// Both engines tell how far they are inside an image: the tokens climb before the first
// image is finished and end at the run's total.
func TestRunReportsStepsInsideImages(t *testing.T) {
	for _, mode := range []string{ModeTarget, ModeSpec} {
		models, cat := TestModels()
		seed := uint64(3)
		one := 0 // target mode: one token per AR step
		plan, err := Validate(api.GenerateRequest{Class: api.Classes{"0", "1"}, N: 2, Seed: &seed, Mode: mode, NumIter: &one}, cat)
		if mode == ModeSpec {
			plan, err = Validate(api.GenerateRequest{Class: api.Classes{"0", "1"}, N: 2, Seed: &seed, Mode: mode, Gamma: "1"}, cat)
		}
		if err != nil {
			t.Fatal(err)
		}
		gen, err := NewGenerator(plan, models, 2)
		if err != nil {
			t.Fatal(err)
		}
		var steps []Step
		if _, err := gen.GenerateWatched(context.Background(), plan.Classes, 0, Watch{Step: func(s Step) { steps = append(steps, s) }}); err != nil {
			t.Fatal(err)
		}
		total := plan.Images() * plan.SeqLen
		inside, last := false, 0
		for _, s := range steps {
			if s.Tokens < last {
				t.Errorf("%s: tokens went back: %+v", mode, steps)
			}
			last = s.Tokens
			inside = inside || (s.Images == 0 && s.Tokens > 0 && s.Tokens < plan.SeqLen)
		}
		if !inside || last != total {
			t.Errorf("%s: no step inside the first images, or the last (%d) is not the total %d: %+v", mode, last, total, steps)
		}
	}
}

// slowTransformer makes each pass take a while, so a run lasts a few seconds.
type slowTransformer struct {
	mar.Transformer
	pause time.Duration
}

func (s slowTransformer) Forward(tokens, mask []float32, classIDs []int64, drop []float32, batch int, z []float32) error {
	time.Sleep(s.pause)
	return s.Transformer.Forward(tokens, mask, classIDs, drop, batch, z)
}

// In a pipe, a run's progress is plain lines: the tokens inside the image with its AR step,
// at most one a second plus the last (at 100%), and after the first AR step what the run
// will take.
func TestRunProgressInAPipe(t *testing.T) {
	models, cat := TestModels()
	slow := *models["target"]
	slow.Transformer = slowTransformer{slow.Transformer, 350 * time.Millisecond}
	models["target"] = &slow
	seed, one := uint64(1), 0
	plan, err := Validate(api.GenerateRequest{Class: api.Classes{"1"}, Seed: &seed, Mode: ModeTarget, NumIter: &one}, cat)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := NewGenerator(plan, models, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	no := false
	start := time.Now()
	bar := NewRunProgress(&out, plan, progress.Options{Terminal: &no}, nil)
	if _, err := gen.GenerateWatched(context.Background(), plan.Classes, 0, bar.Watch()); err != nil {
		t.Fatal(err)
	}
	bar.Done()
	elapsed := time.Since(start)
	var counts []string
	estimate := ""
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		switch {
		case strings.HasPrefix(line, "generate: "):
			counts = append(counts, line)
		case strings.HasPrefix(line, "AR step 1/6 took "):
			estimate = line
		default:
			t.Errorf("unexpected line %q", line)
		}
	}
	// the first line comes at the first step, then one a second at most, then the last
	if most := int(elapsed/time.Second) + 2; len(counts) > most {
		t.Errorf("%d count lines in %v, want at most %d:\n%s", len(counts), elapsed, most, out.String())
	}
	if len(counts) == 0 {
		t.Fatalf("no progress line: %q", out.String())
	}
	if want := "generate: 1/6 tokens (17%)"; !strings.HasPrefix(counts[0], want) ||
		!strings.HasSuffix(counts[0], "; AR step 1/6, 0/1 images") || !strings.Contains(counts[0], "left") {
		t.Errorf("first line %q, want %q... with the time left, the AR step and the images", counts, want)
	}
	if want := "generate: 6/6 tokens (100%)"; !strings.HasPrefix(counts[len(counts)-1], want) {
		t.Errorf("last line %q, want %q...", counts[len(counts)-1], want)
	}
	if !strings.Contains(estimate, "for this image (estimated from this step)") {
		t.Errorf("estimate line %q", estimate)
	}
	if strings.Contains(out.String(), "\r") {
		t.Error("plain output holds a carriage return")
	}
}

// The estimate after the first AR step scales its time by the AR steps of every batch.
func TestRunProgressEstimate(t *testing.T) {
	p := &RunProgress{images: 4, tokens: 4 * 256}
	at := time.Unix(0, 0)
	p.start, p.now = at, func() time.Time { return at.Add(3700 * time.Millisecond) }
	got := p.estimate(Step{Tokens: 2, Step: 1, Steps: 256, Batch: 1, Batches: 2})
	if want := "AR step 1/256 took 3.7 s: about 32 min for the 4 images in 2 batches (estimated from this step)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := p.estimate(Step{Step: 1}); got != "" {
		t.Errorf("spec round with no token yet: %q, want none", got)
	}
	got = p.estimate(Step{Tokens: 16, Step: 3})
	if want := fmt.Sprintf("round 3 decoded 16 of %d tokens in 3.7 s: about 4 min for the 4 images (estimated from these rounds)", 4*256); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// With the cache, the first AR steps are full passes and most later ones lazy (a share of a
// pass): the estimate waits for two lazy steps and counts each full-pass step at their mean
// and each lazy one at the faster lazy step's time, where the first step's time for every
// step would say 64 s here. 64 steps, the default cache: 12 full-pass steps (the first 6
// before the first lazy one), 52 lazy.
func TestRunProgressEstimateWithTheCache(t *testing.T) {
	cache := mar.CacheSettings{On: true, FullSteps: mar.DefaultCacheFullSteps, RefreshEvery: mar.DefaultCacheRefreshEvery, ReuseCFG: true}
	at := time.Unix(0, 0)
	p := &RunProgress{images: 1, tokens: 256, cache: cache, start: at}
	p.now = func() time.Time { return at }
	var lines []string
	for k := 1; k <= 9; k++ {
		switch {
		case k < 7:
			at = at.Add(time.Second + time.Duration(k-3)*100*time.Millisecond) // 0.8 s to 1.3 s: 1.05 s on average
		case k == 7:
			at = at.Add(300 * time.Millisecond) // the first lazy call allocates
		default:
			at = at.Add(200 * time.Millisecond)
		}
		if line := p.estimate(Step{Tokens: k, Step: k, Steps: 64, Batch: 1, Batches: 1}); line != "" {
			lines = append(lines, line)
			break // step says it once
		}
		p.last = at
	}
	want := "AR step 8/64: the cache's lazy steps took 200 ms, the 6 full-pass steps before them 1.1 s each: about 23 s for this image (estimated from these steps)"
	if len(lines) != 1 || lines[0] != want {
		t.Errorf("got %q, want one line %q", lines, want)
	}
}

// With the costs timed at open the AR steps are weighed by them: MAR's schedule reveals one
// token at the first of 64 steps over 256 tokens and six at the last, so a pass-bound run
// (head calls free here) has 63 steps' time left after its first, where the tokens' rate
// says 255 (about 4 min at 1 s a step); the estimate says 64 steps' time.
func TestRunProgressWeighsTheSteps(t *testing.T) {
	plan := Plan{Classes: []int{0}, SeqLen: 256, Options: mar.Options{CFG: 1, NumIter: 64, Steps: 10}}
	var out bytes.Buffer
	no := false
	p := NewRunProgress(&out, plan, progress.Options{Terminal: &no}, &Costs{Pass: time.Second, Precision: mar.FP32})
	at := p.start.Add(time.Second)
	p.now = func() time.Time { return at }
	p.step(Step{Tokens: 1, Step: 1, Steps: 64, Batch: 1, Batches: 1})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], ", about 63 s left; AR step 1/64, 0/1 images") {
		t.Errorf("count line %q, want 63 s left", lines[0])
	}
	if want := "AR step 1/64 took 1.0 s: about 64 s for this image (estimated from this step, the AR steps weighed by the costs timed at open)"; len(lines) != 2 || lines[1] != want {
		t.Errorf("estimate %q, want %q", lines[len(lines)-1], want)
	}
	// half the batches done: the second batch's first step
	if got := p.doneShare(Step{Step: 0, Steps: 64, Batch: 2, Batches: 2}); got != 0.5 {
		t.Errorf("after the first of two batches %v done, want 0.5", got)
	}
}
