package generation

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/mar"
)

// An image costs a pass per AR step and a head call per token and diffusion step, both twice
// when guided; annealing counts each AR step's own steps.
func TestCostsOfAnImage(t *testing.T) {
	c := Costs{Pass: time.Second, Head: 10 * time.Millisecond, Precision: mar.FP32}
	opt := mar.Options{CFG: 1, NumIter: 256, Steps: 100}
	if got, want := c.Image(opt, 256), 256*time.Second+256*100*10*time.Millisecond; got != want {
		t.Errorf("one token per step: %v, want %v", got, want)
	}
	opt.CFG = 2.9
	if got, want := c.Image(opt, 256), 2*(256*time.Second+256*100*10*time.Millisecond); got != want {
		t.Errorf("guided, timed unguided: %v, want %v", got, want)
	}
	g := c
	g.Guided = true
	if got, want := g.Image(opt, 256), 256*time.Second+256*100*10*time.Millisecond; got != want {
		t.Errorf("guided, timed guided: %v, want %v", got, want)
	}
	opt.CFG = 1
	if got, want := g.Image(opt, 256), (256*time.Second+256*100*10*time.Millisecond)/2; got != want {
		t.Errorf("unguided, timed guided: %v, want %v", got, want)
	}
	// two AR steps of 3 tokens, 10 then 4 diffusion steps
	opt = mar.Options{CFG: 1, NumIter: 2, Steps: 10, StepsLate: 4}
	sizes := mar.StepSizes(6, 2)
	want := 2*time.Second + time.Duration(sizes[0]*10+sizes[1]*4)*10*time.Millisecond
	if got := c.Image(opt, 6); got != want {
		t.Errorf("annealed: %v, want %v", got, want)
	}
}

// A run slower than the pack's presets hears what it costs and which presets are faster, the
// cheapest first, each with where its settings come from; the default run names none faster
// than itself.
func TestDescribeCostsNamesFasterPresets(t *testing.T) {
	models, cat := TestModels()
	seed, one := uint64(1), 0
	slow, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Seed: &seed, Mode: ModeTarget, NumIter: &one}, cat)
	if err != nil {
		t.Fatal(err)
	}
	c := Costs{Pass: 2 * time.Second, Head: 20 * time.Millisecond, Precision: mar.FP32}
	var out bytes.Buffer
	if err := DescribeCosts(&out, "", c, cat, &slow, 1); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// 6 AR steps of 2 s and 6 tokens x 10 steps of 20 ms
	if want := "cost here: about 13 s per image for this run: an estimate from one unguided transformer pass (2.0 s) and head call (20 ms) timed at open, fp32, 1 thread"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	var faster []string
	for _, l := range lines[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(l, "  faster: --preset "), " ")
		faster = append(faster, strings.TrimSuffix(name, ","))
		if !strings.Contains(l, " per image: ") || !strings.Contains(l, " [measured: ") {
			t.Errorf("line %q lacks the preset's settings or provenance", l)
		}
	}
	// fast falls back to balanced on a pack without a distilled head: named once, as balanced
	if strings.Join(faster, ",") != "balanced,quality" {
		t.Errorf("faster presets %v, want balanced then quality:\n%s", faster, out.String())
	}
	out.Reset()
	if _, err := TellCosts(&out, "  ", models["target"], mar.FP32, cat, nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "  cost here: about ") || !strings.Contains(got, " for the default, preset ") || strings.Contains(got, "faster") {
		t.Errorf("default request: %q", got)
	}
}

// With the cache on, a lazy AR step costs what a lazy step was timed at and a full one what a
// full cached step was, not a plain pass each: at MAR's speed setting (64 steps, the default
// cache: 5 plain passes, 7 full cached steps, 52 lazy) the estimate is about a third of the
// uncached one here, where a plain pass per step would keep it whole.
func TestCostsOfACachedImage(t *testing.T) {
	c := Costs{Pass: time.Second, Head: time.Millisecond, Precision: mar.FP32,
		Full: 1100 * time.Millisecond, Lazy: 200 * time.Millisecond, LazySize: 4}
	cache := mar.CacheSettings{On: true, FullSteps: mar.DefaultCacheFullSteps, RefreshEvery: mar.DefaultCacheRefreshEvery, Recompute: 16, ReuseCFG: true}
	opt := mar.Options{CFG: 1, NumIter: 64, Steps: 10, Cache: cache}
	kinds := map[mar.StepKind]int{}
	for k := range 64 {
		kinds[cache.Kind(k, 64)]++
	}
	if kinds[mar.StepPlain] != 5 || kinds[mar.StepFull] != 7 || kinds[mar.StepLazy] != 52 {
		t.Fatalf("step kinds %v, want 5 plain, 7 full, 52 lazy", kinds)
	}
	heads := 256 * 10 * time.Millisecond
	if got, want := c.Image(opt, 256), 5*time.Second+7*1100*time.Millisecond+52*200*time.Millisecond+heads; got != want {
		t.Errorf("cached: %v, want %v", got, want)
	}
	opt.Cache = mar.CacheSettings{}
	if got, want := c.Image(opt, 256), 64*time.Second+heads; got != want {
		t.Errorf("uncached: %v, want %v", got, want)
	}
	opt.Cache, c.Lazy = cache, 0
	if got, want := c.Image(opt, 256), 64*time.Second+heads; got != want {
		t.Errorf("cached, the cache not timed: %v, want %v (the plain pass per step)", got, want)
	}
}

// A run with the cache times a full and a lazy cached step at open and says so; the lazy step
// predicts the mean of the run's lazy step sizes.
func TestTellCostsTimesTheCache(t *testing.T) {
	models, ok := TestORTModels()
	if !ok {
		t.Skip("ONNX Runtime not set up (make setup)")
	}
	man, err := LoadManifest("target")
	if err != nil {
		t.Fatal(err)
	}
	cat := Catalog{TargetPack: "target", Target: man}
	m, err := models.Model("target", mar.FP32)
	if err != nil {
		t.Fatal(err)
	}
	seed, iters := uint64(1), 4
	one := 1
	plan, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Seed: &seed, Mode: ModeTarget, NumIter: &iters,
		Cache: &api.CacheRequest{FullSteps: &one}}, cat)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := TellCosts(&out, "", m, mar.FP32, cat, &plan, 1); err != nil {
		t.Fatal(err)
	}
	size := meanLazySize(plan.Options.Cache, plan.SeqLen, 4)
	if size < 1 {
		t.Fatalf("no lazy step in %+v", plan.Options.Cache)
	}
	if want := fmt.Sprintf(" and a lazy one over %d token", size); !strings.Contains(out.String(), want) {
		t.Errorf("%q lacks %q", out.String(), want)
	}
}
