package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"marspec/bench"
	"marspec/generation"
	"marspec/mar"
	"marspec/progress"
)

func runBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	rt.addPrecisionFlag(fs)
	target := fs.String("target", "target", "target pack")
	draft := fs.String("draft", "draft", "draft pack")
	images := fs.Int("images", 10, "images per generation measurement")
	reps := fs.Int("reps", 20, "repetitions per forward measurement")
	spec := fs.Bool("spec", false, "benchmark speculative decoding instead (a table over settings)")
	steps := fs.Int("steps", 0, "diffusion sampling steps (0 = the pack's)")
	profile := fs.Bool("profile", false, "profile one target-only generation instead: shares of transformer, head, ORT fixed cost and Go, per-step and fused head side by side")
	var pf bench.ProfileSettings
	fs.IntVar(&pf.Batch, "batch", 0, "--profile: images per batch (0 = all)")
	fs.IntVar(&pf.NumIter, "num-iter", 0, "--profile, --precisions: AR steps (0 = one token per step)")
	fs.Float64Var(&pf.CFG, "cfg", 1, "--profile: guidance scale (1 = none)")
	fs.IntVar(&pf.Rounds, "rounds", 3, "--profile/--parts: timed generations (per path, interleaved, for --profile); --precisions: measurements per precision, in turns")
	var ps bench.PrecisionSettings
	precisions := fs.String("precisions", "", "compare the target pack at these precisions side by side instead (e.g. fp32,int8): output differences, then ms per transformer pass and head step and images/s, median of --rounds taken in turns; one precision alone gives its times (e.g. a pass over gamma+1 rows against one row)")
	forwardBatches := fs.String("forward-batches", "1,8,32", "--precisions: transformer batches (images)")
	headRows := fs.String("head-rows", "1,8,32", "--precisions: head batches (token rows)")
	genBatches := fs.String("gen-batches", "1,8", "--precisions: one timed generation per entry, of that many images in one batch (--num-iter, --steps; empty = none)")
	samplers := fs.String("samplers", "", "--profile: compare head samplers instead of the head paths: sampler:steps[:eta], comma-separated "+
		"(e.g. ddpm:25,ddim:10:1,distilled:4): wall time, images/s and the head's share, interleaved")
	fs.BoolVar(&pf.HeadCalls, "head-calls", false, "with --profile: only time one reverse diffusion per token count, per-step against fused head, interleaved (no whole generations)")
	opening := fs.Bool("opening", false, "with --profile --samplers: run each sampler without and with the opening memo (the first AR step's conditions remembered per class), interleaved")
	parts := fs.Bool("parts", false, "time one target-only generation per model part instead (transformer pass, head step, decode; "+
		"the pack's open time), as scripts/bench/realsize_cpu_bench.py sets beside the official code; takes --batch, --num-iter, --cfg, --steps, --images, --rounds, --no-warm; "+
		"with --cache, the generation runs with the cache (its knobs as generate's --cache-* flags)")
	gemm := fs.String("gemm", "", "with --parts: also measure ONNX Runtime's fp32 MatMul at MxKxN (e.g. 2560x768x3072), the peak the parts are compared with")
	asJSON := fs.Bool("json", false, "with --parts: print one JSON object instead of the table")
	cacheCompare := fs.Bool("cache", false, "compare target-only generation without and with the cache across AR steps instead (docs/cache.md): images/s, speedup and shares, "+
		"the two taking turns for --rounds rounds (--images, --batch, --num-iter, --cfg, --steps; the cache's knobs as generate's --cache-* flags)")
	var cf generation.CacheFlags
	addCacheKnobFlags(fs, &cf)
	fusedHead := fs.Bool("fused-head", false, "with --parts: time the pack's fused head graph (head_loop.onnx, one call per AR step) as the head, as a GPU samples, instead of the per-step path")
	noWarm := fs.Bool("no-warm", false, "with --cache or --parts: no uncounted warm-up round (for runs whose rounds take minutes)")
	var sb bench.SpecGrid
	quiet := addSpecGridFlags(fs, &sb)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := generation.ValidateRuntime(rt.provider, rt.threads); err != nil {
		return err
	}
	if *precisions != "" {
		ps.Reps, ps.Rounds, ps.NumIter, ps.Steps = *reps, pf.Rounds, pf.NumIter, *steps
		return comparePrecisions(rt, *target, *precisions, *forwardBatches, *headRows, *genBatches, ps)
	}
	if *parts {
		// --parts --cache: the timed generation runs with the cache; cacheFor nil: without it
		var cacheFor func(*mar.Manifest) (mar.CacheSettings, error)
		if *cacheCompare {
			cacheFor = func(man *mar.Manifest) (mar.CacheSettings, error) {
				return generation.CacheSettingsFor(cf, flagsSet(fs), man, *target)
			}
		}
		return runParts(rt, *target, bench.PartsSettings{Images: *images, Batch: pf.Batch, NumIter: pf.NumIter, Steps: *steps,
			Rounds: pf.Rounds, CFG: pf.CFG, NoWarm: *noWarm, FusedHead: *fusedHead}, cacheFor, *gemm, *asJSON)
	}
	if *cacheCompare {
		m, err := rt.open(*target)
		if err != nil {
			return err
		}
		c, err := generation.CacheSettingsFor(cf, flagsSet(fs), m.Manifest, *target)
		if err != nil {
			return err
		}
		pf.Images = *images
		return bench.CacheCompare(os.Stdout, os.Stderr, m, pf, *steps, rt.threads, []mar.CacheSettings{c}, !*noWarm)
	}
	if *profile {
		m, err := rt.open(*target)
		if err != nil {
			return err
		}
		pf.Images = *images
		if *samplers != "" {
			return bench.ProfileSamplers(os.Stdout, m, pf, *samplers, rt.threads, *opening)
		}
		if *opening {
			return fmt.Errorf("--opening takes --samplers (e.g. --samplers distilled:1,ddim:10:1)")
		}
		return bench.Profile(os.Stdout, m, pf, *steps, rt.threads)
	}
	if *spec {
		if _, _, err := sb.Configs(); err != nil { // before opening anything
			return err
		}
		t, err := rt.open(*target)
		if err != nil {
			return err
		}
		d, err := rt.open(*draft)
		if err != nil {
			return err
		}
		fmt.Printf("# marspec bench --spec: %s/%s, %d CPUs, provider %s; target %s, draft %s\n\n",
			runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), rt.provider, t.Manifest.Name, d.Manifest.Name)
		return sb.Run(os.Stdout, t, d, *steps, func(total int) bench.Progress {
			return progress.New(os.Stderr, "bench --spec", "runs", total, progress.Options{Quiet: *quiet})
		})
	}
	if *images < 1 || *reps < 1 {
		return fmt.Errorf("--images and --reps must be at least 1")
	}
	fmt.Printf("# marspec bench: %s/%s, %d CPUs, provider %s, intra-op threads %d\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), rt.provider, rt.threads)
	var models []bench.Named
	for _, name := range []string{*target, *draft} {
		m, err := rt.open(name)
		if err != nil {
			return err
		}
		models = append(models, bench.Named{Name: name, Model: m})
	}
	perImage, err := bench.Speed(os.Stdout, models, *images, *reps)
	if err != nil {
		return err
	}
	fmt.Printf("draft/target time ratio c (generation, per image): %.3f\n", perImage[*draft]/perImage[*target])
	return nil
}

// addSpecGridFlags registers bench --spec's grid in b and returns its --quiet.
func addSpecGridFlags(fs *flag.FlagSet, b *bench.SpecGrid) *bool {
	fs.StringVar(&b.Gammas, "gammas", "2,4,8,16,auto", "spec: gamma values")
	fs.StringVar(&b.Prefills, "prefills", "0,0.05,0.15", "spec: prefill ratios")
	fs.StringVar(&b.Verifies, "verifies", "prefix,group", "spec: verification strategies")
	fs.StringVar(&b.Acceptances, "acceptances", "paper,exact", "spec: acceptance criteria")
	fs.StringVar(&b.Schedules, "schedules", "batched,lazy", "spec: schedules of prefix rounds (group rounds are always one pass)")
	fs.StringVar(&b.Batches, "batches", "1,8,32", "spec: batch sizes (images per run = max(batch, --spec-images))")
	fs.StringVar(&b.Drafts, "drafts", "pack", "spec: draft sources: pack (the --draft pack), self (the target drafting from its own previous pass), exit (the target's first blocks plus its trained exit; prefix + batched rows only)")
	fs.StringVar(&b.ExitMaxErrors, "exit-max-errors", "0", "spec, draft exit: confidence bounds (predicted RMS error of the exit at which drafting stops; 0 = none)")
	fs.StringVar(&b.Rejections, "rejections", "residual", "spec: what replaces a rejected draft: residual and/or target")
	fs.StringVar(&b.Tolerances, "tolerances", "0", "spec: acceptance tolerances in nats (0 = off)")
	fs.IntVar(&b.ImagesMin, "spec-images", 4, "spec: at least this many images per configuration")
	fs.IntVar(&b.AblationGamma, "ablation-gamma", 8, "spec: gamma of the alignment ablation (paper: 32)")
	return fs.Bool("quiet", false, "no progress on stderr (a bar on a terminal, a line per run otherwise)")
}

// splitList reads a comma-separated flag value, blanks dropped.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
