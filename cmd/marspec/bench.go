package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"text/tabwriter"
	"time"

	"marspec/generation"
	"marspec/mar"
)

func runBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	target := fs.String("target", "target", "target pack")
	draft := fs.String("draft", "draft", "draft pack")
	images := fs.Int("images", 10, "images per generation measurement")
	reps := fs.Int("reps", 20, "repetitions per forward measurement")
	spec := fs.Bool("spec", false, "benchmark speculative decoding instead (a table over settings)")
	steps := fs.Int("steps", 0, "diffusion sampling steps (0 = the pack's)")
	profile := fs.Bool("profile", false, "profile one target-only generation instead: shares of transformer, head, ORT fixed cost and Go, per-step and fused head side by side")
	var pf profileFlags
	fs.IntVar(&pf.batch, "batch", 0, "--profile: images per batch (0 = all)")
	fs.IntVar(&pf.numIter, "num-iter", 0, "--profile: AR steps (0 = one token per step)")
	fs.Float64Var(&pf.cfg, "cfg", 1, "--profile: guidance scale (1 = none)")
	fs.IntVar(&pf.rounds, "rounds", 3, "--profile: timed generations per path, interleaved")
	var sb specBench
	sb.add(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := generation.ValidateRuntime(rt.provider, rt.threads); err != nil {
		return err
	}
	if *profile {
		m, err := rt.open(*target)
		if err != nil {
			return err
		}
		pf.images = *images
		return runProfile(m, pf, *steps, rt.threads)
	}
	if *spec {
		if _, _, err := sb.configs(); err != nil { // before opening anything
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
		return sb.run(t, d, *steps)
	}
	if *images < 1 || *reps < 1 {
		return fmt.Errorf("--images and --reps must be at least 1")
	}
	fmt.Printf("# marspec bench: %s/%s, %d CPUs, provider %s, intra-op threads %d\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), rt.provider, rt.threads)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "model\tpart\tbatch\tms/call")
	perImage := map[string]float64{}
	for _, name := range []string{*target, *draft} {
		m, err := rt.open(name)
		if err != nil {
			return err
		}
		for _, b := range []int{1, 8, 32} {
			ms, err := timeTransformer(m, b, *reps)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\ttransformer\t%d\t%.3f\n", name, b, ms)
		}
		for _, b := range []int{1, 8, 32} {
			ms, err := timeHead(m, b, *reps*5)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\thead step\t%d\t%.3f\n", name, b, ms)
		}
		classes := make([]int, *images)
		for i := range classes {
			classes[i] = i % len(m.Manifest.Classes)
		}
		start := time.Now()
		if _, err := m.Generate(classes, mar.Options{Seed: 1, Batch: *images}); err != nil {
			return err
		}
		sec := time.Since(start).Seconds()
		perImage[name] = sec / float64(*images)
		fmt.Fprintf(w, "%s\tgenerate (one token per step, batch %d)\t%d\t%.1f images/s\n", name, *images, *images, float64(*images)/sec)
	}
	w.Flush()
	fmt.Printf("draft/target time ratio c (generation, per image): %.3f\n", perImage[*draft]/perImage[*target])
	return nil
}

func timeTransformer(m *mar.Model, batch, reps int) (float64, error) {
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	ctx := mar.NewContextBatch(batch, L, D)
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, D)
	for r := 0; r < batch; r++ { // half the tokens known, as mid-generation
		for _, pos := range rng.Perm(L)[:L/2] {
			for j := range x {
				x[j] = rng.NormFloat64() * 0.5
			}
			ctx.Set(r, pos, x)
		}
	}
	z := make([]float32, batch*L*W)
	if err := ctx.Condition(m.Transformer, z, nil); err != nil { // warm-up
		return 0, err
	}
	start := time.Now()
	for i := 0; i < reps; i++ {
		if err := ctx.Condition(m.Transformer, z, nil); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Microseconds()) / 1000 / float64(reps), nil
}

func timeHead(m *mar.Model, n, reps int) (float64, error) {
	D, W := m.Manifest.TokenDim, m.Manifest.Width
	xt, t, z, out := make([]float32, n*D), make([]float32, n), make([]float32, n*W), make([]float32, n*2*D)
	for i := range t {
		t[i] = 500
	}
	if err := m.Head.Predict(xt, t, z, n, out); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := 0; i < reps; i++ {
		if err := m.Head.Predict(xt, t, z, n, out); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Microseconds()) / 1000 / float64(reps), nil
}
