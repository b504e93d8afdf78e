package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"marspec/arsampler"
	"marspec/mar"
	"marspec/render"
)

// maxImages bounds one request: larger runs belong to offline scoring with its own batching.
const maxImages = 10000

type generateFlags struct {
	rt                         *runtimeFlags
	mode, model, target, draft string
	class                      string
	n, numIter, steps, batch   int
	seed                       uint64
	out, cfgSchedule           string
	cfg, temp                  float64
	finalNoise                 bool
	spec                       specFlags
	jsonOut                    bool
	heatmap                    string
}

func runGenerate(args []string) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	g := generateFlags{rt: addRuntimeFlags(fs)}
	fs.StringVar(&g.mode, "mode", "", "target, draft or spec (default: spec, or target-only when --model is given)")
	fs.StringVar(&g.model, "model", "", "target-only generation with this pack: target, draft (embedded) or a pack folder")
	fs.StringVar(&g.target, "target", "target", "target pack (embedded name or folder)")
	fs.StringVar(&g.draft, "draft", "draft", "draft pack (embedded name or folder), or self: the target drafts from its own previous pass (no draft network; spec mode)")
	fs.StringVar(&g.class, "class", "all", "class index, class name, or 'all' (n images of every class)")
	fs.IntVar(&g.n, "n", 1, "images per class")
	fs.Uint64Var(&g.seed, "seed", 0, "random seed: the same seed and options give the same image bytes")
	fs.StringVar(&g.out, "out", "out", "output folder")
	fs.Float64Var(&g.cfg, "cfg", 1, "classifier-free guidance scale (1 = off)")
	fs.StringVar(&g.cfgSchedule, "cfg-schedule", "linear", "guidance schedule over AR steps: linear (MAR) or constant")
	fs.Float64Var(&g.temp, "temperature", 1, "diffusion sampling temperature")
	fs.IntVar(&g.numIter, "num-iter", 0, "AR steps, target/draft modes (0 = one token per step)")
	fs.IntVar(&g.steps, "steps", 0, "diffusion sampling steps (0 = the pack's)")
	fs.IntVar(&g.batch, "batch", 0, "images in flight at once (0 = all, up to 64)")
	fs.BoolVar(&g.finalNoise, "final-step-noise", false, "target/draft modes: give the last diffusion step its variance, as spec mode must (for like-for-like comparisons)")
	g.spec.add(fs)
	fs.BoolVar(&g.jsonOut, "json", false, "print the statistics as one JSON object")
	fs.StringVar(&g.heatmap, "heatmap", "", "spec mode: write the per-position acceptance map (PNG) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	pack, mode := g.target, g.mode
	switch {
	case g.model != "" && (mode == "" || mode == "target"):
		pack, mode = g.model, "target"
	case g.model != "":
		return fmt.Errorf("--model selects target-only generation; with --mode %s use --target and --draft", mode)
	case mode == "":
		mode = "spec"
	case mode == "draft" && g.draft == selfDraftName:
		return fmt.Errorf("--draft self is the target drafting for itself; it has no draft-only mode")
	case mode == "draft":
		pack = g.draft
	case mode != "target" && mode != "spec":
		return fmt.Errorf("mode %q unknown (allowed: target, draft, spec)", mode)
	}
	m, err := g.rt.open(pack)
	if err != nil {
		return err
	}
	classes, err := requestedClasses(m.Manifest, g.class, g.n)
	if err != nil {
		return err
	}
	if g.batch == 0 {
		g.batch = min(64, len(classes))
	}
	opt := mar.Options{Seed: g.seed, CFG: g.cfg, CFGSchedule: g.cfgSchedule, Temperature: g.temp,
		NumIter: g.numIter, Steps: g.steps, Batch: g.batch, FinalStepNoise: g.finalNoise}
	if err := m.Validate(&opt); err != nil {
		return err
	}
	if mode == "spec" {
		return g.runSpec(m, classes, opt)
	}
	start := time.Now()
	images, err := m.Generate(classes, opt)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if err := saveImages(g.out, m, images, describe(opt, "mode="+mode, "pack="+m.Manifest.Name)); err != nil {
		return err
	}
	return g.report(map[string]any{"mode": mode, "images": len(images), "seconds": secs,
		"images_per_second": float64(len(images)) / secs}, nil)
}

// selfDraftName is the --draft value that selects self-drafting.
const selfDraftName = "self"

func (g *generateFlags) runSpec(target *mar.Model, classes []int, opt mar.Options) error {
	var draft *mar.Model // nil: self-drafting
	draftName := selfDraftName
	if g.draft == selfDraftName {
		g.spec.selfDraft = true
	} else {
		var err error
		if draft, err = g.rt.open(g.draft); err != nil {
			return err
		}
		draftName = draft.Manifest.Name
	}
	g.spec.provider = g.rt.provider
	cfg, err := g.spec.config(opt)
	if err != nil {
		return err
	}
	results, sum, err := arsampler.Generate(target, draft, cfg, classes, 0, g.batch)
	if err != nil {
		return err
	}
	images := make([]mar.Image, len(results))
	for i, r := range results {
		images[i] = mar.Image{Index: r.Index, Class: r.Class, Tokens: r.Tokens, Pixels: r.Pixels}
	}
	params := describe(cfg.Sampling, "mode=spec", "target="+target.Manifest.Name, "draft="+draftName, g.spec.describe())
	if knobs := g.spec.describeKnobs(); knobs != "" {
		params += " " + knobs
	}
	if err := saveImages(g.out, target, images, params); err != nil {
		return err
	}
	if g.heatmap != "" {
		man := target.Manifest
		rates := make([]float64, man.SeqLen())
		for i := range rates {
			rates[i] = math.NaN()
			if n := sum.AcceptedAtPos[i] + sum.RejectedAtPos[i]; n > 0 {
				rates[i] = float64(sum.AcceptedAtPos[i]) / float64(n)
			}
		}
		if err := render.WritePNG(g.heatmap, render.Heatmap(rates, man.Grid.Height, man.Grid.Width, 24), ""); err != nil {
			return err
		}
	}
	config := strings.TrimSpace(g.spec.describe() + " " + g.spec.describeKnobs())
	return g.report(map[string]any{"mode": "spec", "config": config, "draft": draftName, "schedule": cfg.Schedule.String(),
		"lossless": cfg.Lossless(), "rejection": cfg.Rejection.String(), "tolerance": cfg.Tolerance}, &sum)
}

// report prints the run's statistics, as text or as one JSON object.
func (g *generateFlags) report(base map[string]any, sum *arsampler.Summary) error {
	if g.jsonOut {
		if sum != nil {
			data, _ := json.Marshal(sum)
			_ = json.Unmarshal(data, &base)
		}
		return json.NewEncoder(os.Stdout).Encode(base)
	}
	if sum == nil {
		fmt.Printf("%s mode: %d images in %.2f s (%.2f images/s)\n", base["mode"], base["images"], base["seconds"], base["images_per_second"])
		return nil
	}
	s := sum
	fmt.Printf("spec (%s): %d images in %.2f s (target %.2f s, draft %.2f s, other %.2f s)\n",
		base["config"], s.Images, s.Seconds, s.TargetSeconds, s.DraftSeconds, s.OtherSeconds)
	fmt.Printf("  alpha %.3f (%.0f%% Hoeffding interval %.3f to %.3f; per-image mean %.3f, %.3f to %.3f): %d of %d drafts accepted\n",
		s.Alpha, 100*s.AlphaConfidence, s.AlphaLow, s.AlphaHigh, s.ImageAlphaMean, s.ImageAlphaLow, s.ImageAlphaHigh, s.Accepted, s.Drafted)
	fmt.Printf("  rejected: %d resampled (%d tries, %d bound hits), %d taken from the target; %d bonus, %d pre-filled, %d target-only\n",
		s.Resampled, s.ResamplerTries, s.ResamplerBoundHits, s.Fallbacks, s.Bonus, s.Prefilled, s.TargetOnly)
	fmt.Printf("  target: %d passes (%d rows, %.2f per token); draft: %d passes (%d rows), %d self-draft head rows; %d rounds, mean gamma %.2f, %.2f tokens per target pass\n",
		s.TargetForwards, s.TargetRows, s.RowsPerToken, s.DraftForwards, s.DraftRows, s.DraftHeadRows, s.Rounds, s.MeanGamma, s.TokensPerTarget)
	fmt.Printf("  predicted GPU speedup %.2fx = %.2f tokens per pass / (1 + c %.3f x %.2f draft calls per round)\n",
		s.PredictedGPUSpeedup, s.TokensPerTarget, s.CostRatio, s.DraftCallsPerRound)
	fmt.Printf("  draft-target token distance (RMS) %.3f, mean log Sigma %.3f\n", s.MeanTokenDistance, s.MeanLogSigma)
	if lossless, _ := base["lossless"].(bool); !lossless {
		fmt.Printf("  lossy: %s\n", lossyNote(base, s))
	}
	return nil
}

// lossyNote says how far the run's knobs may move each token's law (docs/speculative.md).
func lossyNote(base map[string]any, s *arsampler.Summary) string {
	var notes []string
	if base["rejection"] == "target" {
		notes = append(notes, fmt.Sprintf("rejection=target: TV to the target per token <= its acceptance, alpha %.3f (at most %.3f)", s.Alpha, s.AlphaHigh))
	}
	if tol, _ := base["tolerance"].(float64); tol > 0 {
		notes = append(notes, fmt.Sprintf("tolerance %g: added acceptance (per-token TV bias with exact+residual) %.3f", tol, s.ToleranceTVBias))
	}
	if len(notes) == 0 {
		notes = append(notes, "not prefix+exact: see docs/speculative.md")
	}
	return strings.Join(notes, "; ")
}

// describe renders sampling options (and extra key=value parts) for PNG metadata.
func describe(opt mar.Options, extra ...string) string {
	parts := append(extra, fmt.Sprintf("seed=%d cfg=%g cfg_schedule=%s temperature=%g num_iter=%d steps=%d final_step_noise=%v",
		opt.Seed, opt.CFG, opt.CFGSchedule, opt.Temperature, opt.NumIter, opt.Steps, opt.FinalStepNoise))
	return strings.Join(parts, " ")
}

func requestedClasses(man *mar.Manifest, class string, n int) ([]int, error) {
	if n < 1 || n > maxImages {
		return nil, fmt.Errorf("--n %d out of range (allowed: 1 to %d)", n, maxImages)
	}
	var ids []int
	if class == "all" {
		for c := range man.Classes {
			ids = append(ids, c)
		}
	} else {
		c, err := man.ClassIndex(class)
		if err != nil {
			return nil, err
		}
		ids = []int{c}
	}
	if len(ids)*n > maxImages {
		return nil, fmt.Errorf("%d images requested (allowed: at most %d)", len(ids)*n, maxImages)
	}
	var classes []int
	for _, c := range ids {
		for i := 0; i < n; i++ {
			classes = append(classes, c)
		}
	}
	return classes, nil
}

func saveImages(dir string, m *mar.Model, images []mar.Image, params string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	man := m.Manifest
	var cells []image.Image
	for _, im := range images {
		img, err := render.FromPixels(im.Pixels, man.Image.Height, man.Image.Width, man.Image.Channels)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%04d_class%d_%s.png", im.Index, im.Class, slug(man.Classes[im.Class]))
		meta := fmt.Sprintf("%s class=%d (%s) index=%d", params, im.Class, man.Classes[im.Class], im.Index)
		if err := render.WritePNG(filepath.Join(dir, name), img, meta); err != nil {
			return err
		}
		cells = append(cells, img)
	}
	cols := len(images)
	if n := countPerClass(images); n > 0 && n < len(images) {
		cols = n
	}
	cols = min(cols, 16)
	if err := render.WritePNG(filepath.Join(dir, "grid.png"), render.Grid(cells, cols, 4), params); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %d images and grid.png to %s\n", len(images), dir)
	return nil
}

// countPerClass returns how many consecutive images share the first class (a grid row each).
func countPerClass(images []mar.Image) int {
	n := 0
	for n < len(images) && images[n].Class == images[0].Class {
		n++
	}
	return n
}

func slug(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}
