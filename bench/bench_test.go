package bench

import (
	"bytes"
	"strings"
	"testing"

	"marspec/generation"
	"marspec/mar"
)

// openEmbedded opens the embedded packs with ONNX Runtime (make setup fetches it).
func openEmbedded(t *testing.T) (target, draft *mar.Model) {
	t.Helper()
	models, ok := generation.TestORTModels()
	if !ok {
		t.Skip("ONNX Runtime not set up (make setup)")
	}
	var err error
	if target, err = models.Model("target", mar.FP32); err == nil {
		draft, err = models.Model("draft", mar.FP32)
	}
	if err != nil {
		t.Fatal(err)
	}
	return target, draft
}

// The three benchmarks through the package's API, at the smallest sizes: each writes its
// table and returns what the CLI prints beside it.
func TestBenchmarksThroughTheAPI(t *testing.T) {
	target, draft := openEmbedded(t)
	var out bytes.Buffer
	perImage, err := Speed(&out, []Named{{"target", target}, {"draft", draft}}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if perImage["target"] <= 0 || perImage["draft"] <= 0 || strings.Count(out.String(), "transformer") != 6 {
		t.Fatalf("per image %v, table:\n%s", perImage, out.String())
	}
	out.Reset()
	if err := Profile(&out, target, ProfileSettings{Images: 2, Batch: 2, NumIter: 4, CFG: 1, Rounds: 1}, 5, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "fused / per-step wall time") {
		t.Fatalf("profile:\n%s", out.String())
	}
	out.Reset()
	parts, err := Parts(target, PartsSettings{Images: 3, Batch: 2, NumIter: 4, Steps: 5, Rounds: 1, CFG: 3})
	if err != nil {
		t.Fatal(err)
	}
	// two batches of 4 AR steps, a guided pass each; 5 head steps per AR step; one decode per image
	if parts.Transformer.Calls != 8 || parts.HeadStep.Calls != 40 || parts.Decode.Calls != 3 || parts.ImagesPerSecond <= 0 ||
		parts.Transformer.Share+parts.HeadStep.Share > 1 {
		t.Fatalf("parts: %+v", parts)
	}
	if err := PrintParts(&out, parts, nil); err != nil || !strings.Contains(out.String(), "transformer pass") {
		t.Fatalf("parts table (%v):\n%s", err, out.String())
	}
	out.Reset()
	// the fused head timed as the head: one call per AR step instead of 5 (the GPU script's head share)
	fused, err := Parts(target, PartsSettings{Images: 3, Batch: 2, NumIter: 4, Steps: 5, Rounds: 1, CFG: 3, FusedHead: true})
	if err != nil {
		t.Fatal(err)
	}
	if parts.HeadPath != "per-step" || fused.HeadPath != "fused" || fused.Transformer.Calls != 8 || fused.HeadStep.Calls != 8 ||
		fused.HeadStep.Share <= 0 || fused.Transformer.Share+fused.HeadStep.Share > 1 {
		t.Fatalf("parts with the fused head: %+v", fused)
	}
	// with the cache (and no warm-up round): the cached graph's calls are timed beside the plain
	// passes, which only the steps no lazy step follows still make
	cache := mar.CacheSettings{On: true, FullSteps: 2, RefreshEvery: 4, Recompute: 3, ReuseCFG: true}
	cached, err := Parts(target, PartsSettings{Images: 2, Batch: 2, NumIter: 8, Steps: 5, Rounds: 1, CFG: 3, Cache: cache, NoWarm: true})
	if err != nil {
		t.Fatal(err)
	}
	if cached.CachedPass.Calls == 0 || cached.Transformer.Calls+cached.CachedPass.Calls < 8 || cached.Transformer.Calls >= 8 ||
		cached.Cache != cache.String() || cached.Transformer.Share+cached.CachedPass.Share+cached.HeadStep.Share > 1 {
		t.Fatalf("parts with the cache: %+v", cached)
	}
	if err := PrintParts(&out, cached, nil); err != nil || !strings.Contains(out.String(), "cached graph pass") {
		t.Fatalf("parts table with the cache (%v):\n%s", err, out.String())
	}
	out.Reset()
	grid := SpecGrid{Gammas: "4", Prefills: "0.05", Verifies: "prefix", Acceptances: "exact", Schedules: "batched",
		Batches: "1", Drafts: "pack", ExitMaxErrors: "0", Rejections: "residual", Tolerances: "0", ImagesMin: 2, AblationGamma: 4}
	runs := 0
	bar := func(total int) Progress { runs = total; return silent{} }
	if err := grid.Run(&out, target, draft, 5, bar); err != nil {
		t.Fatal(err)
	}
	if runs != 2+1+4 || !strings.Contains(out.String(), "| 4 | 0.05 | prefix | batched | exact | 1 |") || !strings.Contains(out.String(), "Alignment ablation") {
		t.Fatalf("%d runs announced; tables:\n%s", runs, out.String())
	}
}

// countedLoop counts the fused head's calls.
type countedLoop struct {
	mar.LoopRunner
	calls *int
}

func (c countedLoop) RunLoop(n, steps, halves int, fill func(mar.LoopInputs), read func(mar.LoopOutputs)) error {
	*c.calls++
	return c.LoopRunner.RunLoop(n, steps, halves, fill, read)
}

// The reverse-diffusion table's fused column runs the fused graph where sampling on this
// device does not take it (the embedded pack on the CPU): it once timed the per-step path
// twice. --head-calls prints that table alone.
func TestProfileHeadCallsRunTheFusedGraph(t *testing.T) {
	target, _ := openEmbedded(t)
	loop, err := target.Head.(interface {
		FusedLoop() (mar.LoopRunner, error)
	}).FusedLoop()
	if err != nil || loop == nil {
		t.Fatalf("the embedded target's fused graph: %v", err)
	}
	if target.Head.(mar.LoopHead).HeadLoop() != nil {
		t.Skip("sampling takes the fused graph here already: nothing to tell apart")
	}
	calls := 0
	pf := ProfileSettings{Images: 1, Batch: 1, NumIter: 4, CFG: 1, Rounds: 1, HeadCalls: true}
	opt := mar.Options{Seed: 1, CFG: 1, NumIter: 4, Steps: 5, Batch: 1}
	if err := target.Validate(&opt); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := diffusionTable(&out, target, countedLoop{loop, &calls}, pf, opt); err != nil {
		t.Fatal(err)
	}
	sizes := strings.Count(out.String(), "\n") - 1 // a header, then a line per token count
	if want := sizes * (pf.Rounds + 3); calls != want {
		t.Fatalf("the fused column ran the fused graph %d times, want %d (%d token counts):\n%s", calls, want, sizes, out.String())
	}
	out.Reset()
	if err := Profile(&out, target, pf, 5, 1); err != nil || !strings.Contains(out.String(), "fused ms") ||
		strings.Contains(out.String(), "share of wall time") {
		t.Fatalf("--head-calls (%v) should print the reverse-diffusion table alone:\n%s", err, out.String())
	}
}
