package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"marspec/diffusion"
	"marspec/generation"
	"marspec/progress"
)

// maxImages bounds one request: larger runs belong to offline scoring with its own batching.
const maxImages = 10000

// The --draft values (draft= in eval configurations) that draft with the target itself.
const (
	selfDraftName = generation.DraftSelf // from its own previous pass
	exitDraftName = generation.DraftExit // its first blocks plus a trained exit
)

type generateFlags struct {
	generation.GenerateSettings
	rt            *runtimeFlags
	batch         int
	out, grid     string
	overwrite     bool
	jsonOut       bool
	heatmap       string
	server, token string
	quiet         bool
}

func (g *generateFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&g.Mode, "mode", "", "target, draft or spec (default: the default preset's, spec when none; target-only when --model is given)")
	fs.StringVar(&g.Preset, "preset", "", "a named bundle of settings from the target pack's manifest (marspec models lists them); flags given explicitly win")
	fs.StringVar(&g.Model, "model", "", "run one pack alone: target, draft (embedded) or a pack folder; the --draft pack runs in draft mode, any other as --mode target --target PACK")
	fs.StringVar(&g.Target, "target", "target", "target pack (embedded name or folder)")
	fs.StringVar(&g.Draft, "draft", "draft", "draft pack (embedded name or folder), self: the target drafts from its own previous pass, or exit: the target's first blocks plus its trained exit draft (both spec mode, no draft network)")
	fs.StringVar(&g.Class, "class", "all", "class id, name, file-name slug (t-shirt-top), 'all', or a comma-separated list of those")
	fs.IntVar(&g.N, "n", 1, "images per class")
	fs.Uint64Var(&g.Seed, "seed", 0, "random seed: the same seed and options give the same image bytes")
	fs.StringVar(&g.out, "out", "out", "output folder: the images only (what marspec fid scores); must be new or empty unless --overwrite")
	fs.BoolVar(&g.overwrite, "overwrite", false, "reuse a non-empty --out: remove the images an earlier run wrote there (NNNN_classC_*.png) first; other files are kept and listed")
	fs.StringVar(&g.grid, "grid", "", "where the grid of all images goes (default: OUT-grid.png next to the folder; none = no grid)")
	fs.Float64Var(&g.CFG, "cfg", 1, "classifier-free guidance scale, 1 to 50 (1 = off); unset: the preset's or the pack's default (marspec models)")
	fs.StringVar(&g.CFGSchedule, "cfg-schedule", "linear", "guidance schedule over AR steps: linear (MAR) or constant; unset: the preset's or the pack's")
	fs.Float64Var(&g.Temperature, "temperature", 1, "diffusion sampling temperature, 0.05 to 5; unset: the preset's or the pack's")
	fs.StringVar(&g.Sampler, "sampler", "ddpm", "head sampler: "+diffusion.SamplerNames()+" (spec mode: ddpm only); unset: the preset's or the pack's")
	fs.Float64Var(&g.Eta, "eta", 0, "ddim only: 0 = deterministic to 1 = ddpm's law")
	fs.IntVar(&g.NumIter, "num-iter", 0, "AR steps, target/draft modes (0 = one token per step); unset: the preset's or the pack's")
	fs.IntVar(&g.Steps, "steps", 0, "diffusion sampling steps (0 = the pack's); unset: the preset's or the pack's")
	fs.IntVar(&g.StepsLate, "steps-late", 0, "diffusion steps of the last AR step, annealed linearly from --steps (0 = no annealing)")
	fs.IntVar(&g.batch, "batch", 0, "images in flight at once (0 = all, up to 64)")
	fs.BoolVar(&g.FinalNoise, "final-step-noise", false, "target/draft modes: give the last diffusion step its variance, as spec mode must (for like-for-like comparisons)")
	addCacheFlags(fs, &g.Cache)
	addSpecFlags(fs, &g.Spec)
	fs.BoolVar(&g.jsonOut, "json", false, "print the statistics as one JSON object")
	fs.StringVar(&g.heatmap, "heatmap", "", "spec mode: write the per-position acceptance map (PNG) to this file")
	fs.StringVar(&g.server, "server", "", "generate on a running marspec server (http://HOST:PORT) instead of here: its packs and defaults, the same files in --out")
	fs.BoolVar(&g.quiet, "quiet", false, "no progress on stderr: the packs opening, what the run costs here, its tokens per AR step (a bar on a terminal, a line a second otherwise)")
	fs.StringVar(&g.token, "token", "", "with --server: the server's API token (default $MARSPEC_TOKEN, read when used so -h never shows it)")
}

func runGenerate(args []string) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	g := generateFlags{rt: addRuntimeFlags(fs)}
	g.rt.addPrecisionFlag(fs)
	g.add(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if g.server != "" {
		return g.runOnServer(set)
	}
	req, cat, err := g.request(set, true)
	if err != nil {
		return err
	}
	if err := generation.ValidateRuntime(g.rt.provider, g.rt.threads); err != nil {
		return err
	}
	if err := generation.ValidateBatch(g.batch); err != nil {
		return err
	}
	plan, err := generation.ValidateRequest(req, cat)
	if err != nil {
		return err
	}
	if err := g.outputs().Check(plan.Mode); err != nil {
		return err
	}
	batch := g.batch
	if batch == 0 {
		batch = min(64, plan.Images())
	}
	// the packs open before anything is written: a corrupt pack or a missing device leaves
	// no folder behind
	models := &generation.ORTModels{ORTLib: g.rt.ortLib, Provider: g.rt.device.String(), Threads: g.rt.threads, Tuning: g.rt.tuning}
	if !g.quiet {
		models.Log = os.Stderr
	}
	gen, err := generation.NewGenerator(plan, models, batch)
	if err != nil {
		return err
	}
	var costs *generation.Costs
	if !g.quiet && plan.Spec == nil {
		// what the run costs here and the faster presets, before it takes that long
		m, err := models.Model(plan.Pack, plan.Precision)
		if err != nil {
			return err
		}
		c, err := generation.TellCosts(os.Stderr, "", m, plan.Precision, cat, &plan, g.rt.threads)
		if err != nil {
			return err
		}
		costs = &c
	}
	var made generation.Created
	if _, err := g.prepareOutputs(&made); err != nil {
		made.Undo()
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := g.generateInto(ctx, plan, gen, &made, costs)
	if err != nil {
		return err
	}
	return g.report(plan, cat, res)
}

// generateInto runs the plan into the outputs with a progress bar (tokens, inside the images;
// its AR steps weighed by the costs timed at open, nil when none were)
// and says what it wrote;
// interrupted (Ctrl-C), it says what it kept and returns errInterrupted.
func (g *generateFlags) generateInto(ctx context.Context, plan generation.Plan, gen generation.Generator, made *generation.Created, costs *generation.Costs) (generation.Result, error) {
	bar := generation.NewRunProgress(os.Stderr, plan, progress.Options{Quiet: g.quiet}, costs)
	w, err := generation.WriteRun(ctx, plan, gen, g.outputs(), made, bar.Watch())
	bar.Done()
	if err != nil {
		return generation.Result{}, err
	}
	fmt.Fprintln(os.Stderr, w.Summary(g.out, plan.Images()))
	if w.Interrupted {
		return generation.Result{}, errInterrupted
	}
	return w.Result, nil
}

// outputs are the run's output paths as the flags give them.
func (g *generateFlags) outputs() generation.Outputs {
	return generation.Outputs{Dir: g.out, Grid: g.grid, Heatmap: g.heatmap, Overwrite: g.overwrite}
}

// prepareOutputs readies the outputs (remembered in made) and says what it removed or left
// in the image folder; it returns the grid's path ("none": no grid).
func (g *generateFlags) prepareOutputs(made *generation.Created) (string, error) {
	removed, kept, err := g.outputs().Prepare(made)
	if err != nil {
		return "", err
	}
	if removed > 0 {
		fmt.Fprintf(os.Stderr, "removed %d images of an earlier run from %s\n", removed, g.out)
	}
	if len(kept) > 0 {
		fmt.Fprintf(os.Stderr, "kept %d other files in %s (fid skips files that are not images): %s\n", len(kept), g.out, strings.Join(kept, ", "))
	}
	return g.outputs().GridPath(), nil
}

// request turns the flags into a generation request and the catalog of the packs it needs
// (generation.GenerateSettings.Request; local false reads no pack).
func (g *generateFlags) request(set map[string]bool, local bool) (generation.Request, generation.Catalog, error) {
	g.Provider, g.Precision, g.MaxImages = g.rt.provider, g.rt.precision, maxImages
	return g.GenerateSettings.Request(set, local)
}

// report prints the run's statistics, as text or as one JSON object (generation.WriteRunStats).
func (g *generateFlags) report(plan generation.Plan, cat generation.Catalog, res generation.Result) error {
	return generation.WriteRunStats(os.Stdout, plan, cat, res, g.jsonOut)
}
