package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"marspec/arsampler"
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
	rt                       *runtimeFlags
	mode, preset             string
	model, target, draft     string
	class                    string
	n, numIter, steps, batch int
	stepsLate                int
	seed                     uint64
	out, grid, cfgSchedule   string
	cfg, temp, eta           float64
	sampler                  string
	finalNoise, overwrite    bool
	spec                     generation.SpecSettings
	jsonOut                  bool
	heatmap                  string
	server, token            string
	quiet                    bool
}

func (g *generateFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&g.mode, "mode", "", "target, draft or spec (default: the default preset's, spec when none; target-only when --model is given)")
	fs.StringVar(&g.preset, "preset", "", "a named bundle of settings from the target pack's manifest (marspec models lists them); flags given explicitly win")
	fs.StringVar(&g.model, "model", "", "run one pack alone: target, draft (embedded) or a pack folder; the --draft pack runs in draft mode, any other as --mode target --target PACK")
	fs.StringVar(&g.target, "target", "target", "target pack (embedded name or folder)")
	fs.StringVar(&g.draft, "draft", "draft", "draft pack (embedded name or folder), self: the target drafts from its own previous pass, or exit: the target's first blocks plus its trained exit draft (both spec mode, no draft network)")
	fs.StringVar(&g.class, "class", "all", "class id, name, file-name slug (t-shirt-top), 'all', or a comma-separated list of those")
	fs.IntVar(&g.n, "n", 1, "images per class")
	fs.Uint64Var(&g.seed, "seed", 0, "random seed: the same seed and options give the same image bytes")
	fs.StringVar(&g.out, "out", "out", "output folder: the images only (what marspec fid scores); must be new or empty unless --overwrite")
	fs.BoolVar(&g.overwrite, "overwrite", false, "reuse a non-empty --out: remove the images an earlier run wrote there (NNNN_classC_*.png) first; other files are kept and listed")
	fs.StringVar(&g.grid, "grid", "", "where the grid of all images goes (default: OUT-grid.png next to the folder; none = no grid)")
	fs.Float64Var(&g.cfg, "cfg", 1, "classifier-free guidance scale, 1 to 50 (1 = off)")
	fs.StringVar(&g.cfgSchedule, "cfg-schedule", "linear", "guidance schedule over AR steps: linear (MAR) or constant")
	fs.Float64Var(&g.temp, "temperature", 1, "diffusion sampling temperature, 0.05 to 5")
	fs.StringVar(&g.sampler, "sampler", "ddpm", "head sampler: "+diffusion.SamplerNames()+" (spec mode: ddpm only)")
	fs.Float64Var(&g.eta, "eta", 0, "ddim only: 0 = deterministic to 1 = ddpm's law")
	fs.IntVar(&g.numIter, "num-iter", 0, "AR steps, target/draft modes (0 = one token per step)")
	fs.IntVar(&g.steps, "steps", 0, "diffusion sampling steps (0 = the pack's)")
	fs.IntVar(&g.stepsLate, "steps-late", 0, "diffusion steps of the last AR step, annealed linearly from --steps (0 = no annealing)")
	fs.IntVar(&g.batch, "batch", 0, "images in flight at once (0 = all, up to 64)")
	fs.BoolVar(&g.finalNoise, "final-step-noise", false, "target/draft modes: give the last diffusion step its variance, as spec mode must (for like-for-like comparisons)")
	addSpecFlags(fs, &g.spec)
	fs.BoolVar(&g.jsonOut, "json", false, "print the statistics as one JSON object")
	fs.StringVar(&g.heatmap, "heatmap", "", "spec mode: write the per-position acceptance map (PNG) to this file")
	fs.StringVar(&g.server, "server", "", "generate on a running marspec server (http://HOST:PORT) instead of here: its packs and defaults, the same files in --out")
	fs.BoolVar(&g.quiet, "quiet", false, "no progress on stderr (a bar on a terminal, a line a second otherwise)")
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
	gen, err := generation.NewGenerator(plan, &generation.ORTModels{ORTLib: g.rt.ortLib, Provider: g.rt.device.String(), Threads: g.rt.threads, Tuning: g.rt.tuning, Precision: g.rt.precision}, batch)
	if err != nil {
		return err
	}
	var made generation.Created
	if _, err := g.prepareOutputs(&made); err != nil {
		made.Undo()
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := g.generateInto(ctx, plan, gen, &made)
	if err != nil {
		return err
	}
	return g.report(plan, cat, res)
}

// generateInto runs the plan into the outputs with a progress bar and says what it wrote;
// interrupted (Ctrl-C), it says what it kept and returns errInterrupted.
func (g *generateFlags) generateInto(ctx context.Context, plan generation.Plan, gen generation.Generator, made *generation.Created) (generation.Result, error) {
	bar := progress.New(os.Stderr, "generate", "images", plan.Images(), progress.Options{Quiet: g.quiet})
	w, err := generation.WriteRun(ctx, plan, gen, g.outputs(), made, func(generation.Image) { bar.Add(1, "") })
	bar.Done()
	if err != nil {
		return generation.Result{}, err
	}
	if w.Interrupted {
		msg := fmt.Sprintf("interrupted: kept the %d of %d images finished, in %s", len(w.Images), plan.Images(), g.out)
		if w.Grid != "" {
			msg += ", their grid in " + w.Grid
		}
		fmt.Fprintln(os.Stderr, msg)
		return generation.Result{}, errInterrupted
	}
	written := fmt.Sprintf("wrote %d images to %s", len(w.Images), g.out)
	if w.Grid != "" {
		written += ", the grid to " + w.Grid
	}
	if w.Heatmap != "" {
		written += ", the acceptance map to " + w.Heatmap
	}
	fmt.Fprintln(os.Stderr, written)
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

// request turns the flags into a generation request and the catalog of the packs it needs.
// Only flags given on the command line are set, so presets and defaults come from package
// generation alone.
// With local false the packs are not read (a server runs its own).
func (g *generateFlags) request(set map[string]bool, local bool) (generation.Request, generation.Catalog, error) {
	var req generation.Request
	cat := generation.Catalog{TargetPack: g.target, DraftPack: g.draft, MaxImages: maxImages, Provider: g.rt.provider, Precision: g.rt.precision}
	req.Mode, req.Preset = g.mode, g.preset
	if g.model != "" {
		// the draft pack alone is draft mode (stamped so); any other pack runs as the target
		mode := generation.ModeTarget
		if g.model == g.draft && g.model != selfDraftName && g.model != exitDraftName {
			mode = generation.ModeDraft
		} else {
			cat.TargetPack = g.model
		}
		if g.mode != "" && g.mode != mode {
			return req, cat, &generation.FieldError{Field: "model", Value: g.model, Allowed: "omit --mode, or use --target and --draft with --mode " + g.mode,
				Reason: "runs one pack alone (mode " + mode + ")"}
		}
		req.Mode = mode
	}
	for _, c := range strings.Split(g.class, ",") {
		req.Class = append(req.Class, strings.TrimSpace(c))
	}
	req.N, req.NGiven = g.n, true
	req.Seed = &g.seed
	if set["cfg"] {
		req.CFG = &g.cfg
	}
	if set["cfg-schedule"] {
		req.CFGSchedule = g.cfgSchedule
	}
	if set["temperature"] {
		req.Temperature = &g.temp
	}
	if set["sampler"] {
		req.Sampler = g.sampler
	}
	if set["eta"] {
		req.Eta = &g.eta
	}
	if set["num-iter"] {
		req.NumIter = &g.numIter
	}
	if set["steps"] {
		req.Steps = &g.steps
	}
	if set["steps-late"] {
		req.StepsLate = &g.stepsLate
	}
	if set["final-step-noise"] {
		req.FinalStepNoise = &g.finalNoise
	}
	g.spec.SelfDraft, g.spec.EarlyExit = g.draft == selfDraftName, g.draft == exitDraftName
	if err := g.spec.Request(&req, set); err != nil {
		return req, cat, err
	}
	if !local {
		return req, cat, nil
	}
	// only the packs the mode runs are read, so a bad --draft does not stop a target-only run;
	// the target's settings resolve the preset and the default request
	if req.Mode != generation.ModeDraft {
		p, err := generation.LoadPack(cat.TargetPack)
		if err != nil {
			return req, cat, err
		}
		cat.Target = p.Manifest
	}
	settings, pack := cat.Settings()
	mode, _, _, err := generation.ResolveMode(req, settings, pack)
	if err != nil {
		return req, cat, err
	}
	if mode == generation.ModeDraft && cat.Target != nil && req.Mode == "" { // a draft-mode preset: the draft runs alone
		cat.Target = nil
	}
	if mode == generation.ModeDraft || (mode == generation.ModeSpec && !req.SelfDraft && !req.EarlyExit) {
		if g.draft == selfDraftName || g.draft == exitDraftName {
			return req, cat, &generation.FieldError{Field: "draft", Value: g.draft, Allowed: "a draft pack, or mode spec",
				Reason: "drafting with the target itself has no draft-only mode"}
		}
		p, err := generation.LoadPack(cat.DraftPack)
		if err != nil {
			return req, cat, err
		}
		cat.Draft = p.Manifest
	}
	return req, cat, nil
}

// report prints the run's statistics, as text or as one JSON object.
func (g *generateFlags) report(plan generation.Plan, cat generation.Catalog, res generation.Result) error {
	man := cat.Target
	if plan.Mode == generation.ModeDraft {
		man = cat.Draft
	}
	n := len(res.Images)
	base := map[string]any{"mode": plan.Mode, "pack": man.Name, "images": n, "seconds": res.Seconds,
		"images_per_second": float64(n) / res.Seconds, "params": plan.Params()}
	if plan.Preset != "" {
		base["preset"] = plan.Preset
	}
	sum := res.Summary
	if sum != nil {
		cfg := plan.Spec
		draft := plan.DraftSource()
		if !cfg.SelfDraft && !cfg.EarlyExit {
			draft = cat.Draft.Name
		}
		base["config"], base["draft"], base["schedule"] = plan.SpecText(), draft, cfg.Schedule.String()
		base["lossless"], base["rejection"], base["tolerance"] = cfg.Lossless(), cfg.Rejection.String(), cfg.Tolerance
		if cfg.EarlyExit {
			base["exit_max_error"], base["exit_stops"] = cfg.ExitMaxError, exitStops(res.Images)
		}
	}
	if g.jsonOut {
		if sum != nil {
			data, _ := json.Marshal(sum)
			_ = json.Unmarshal(data, &base)
		}
		return json.NewEncoder(os.Stdout).Encode(base)
	}
	if sum == nil {
		fmt.Printf("%s mode (%s): %d images in %.2f s (%.2f images/s)\n", plan.Mode, man.Name, n, res.Seconds, float64(n)/res.Seconds)
		return nil
	}
	printSpecSummary(base, sum)
	return nil
}

func printSpecSummary(base map[string]any, s *arsampler.Summary) {
	fmt.Printf("spec (%s): %d images in %.2f s (target %.2f s, draft %.2f s, other %.2f s)\n",
		base["config"], s.Images, s.Seconds, s.TargetSeconds, s.DraftSeconds, s.OtherSeconds)
	fmt.Printf("  alpha %.3f (%.0f%% Hoeffding interval %.3f to %.3f; per-image mean %.3f, %.3f to %.3f): %d of %d drafts accepted\n",
		s.Alpha, 100*s.AlphaConfidence, s.AlphaLow, s.AlphaHigh, s.ImageAlphaMean, s.ImageAlphaLow, s.ImageAlphaHigh, s.Accepted, s.Drafted)
	fmt.Printf("  rejected: %d resampled (%d tries, %d bound hits), %d taken from the target; %d bonus, %d pre-filled, %d target-only\n",
		s.Resampled, s.ResamplerTries, s.ResamplerBoundHits, s.Fallbacks, s.Bonus, s.Prefilled, s.TargetOnly)
	fmt.Printf("  target: %d passes (%d rows, %.2f per token); draft: %d passes (%d rows), %d rows drafted by the target's head (self, exit); %d rounds, mean gamma %.2f, %.2f tokens per target pass\n",
		s.TargetForwards, s.TargetRows, s.RowsPerToken, s.DraftForwards, s.DraftRows, s.DraftHeadRows, s.Rounds, s.MeanGamma, s.TokensPerTarget)
	verify := "1"
	if s.VerifyCost != 1 { // early exit: verification runs only the blocks after the exit
		verify = fmt.Sprintf("verification %.3f", s.VerifyCost)
	}
	fmt.Printf("  predicted GPU speedup %.2fx = %.2f tokens per pass / (%s + c %.3f x %.2f draft calls per round)\n",
		s.PredictedGPUSpeedup, s.TokensPerTarget, verify, s.CostRatio, s.DraftCallsPerRound)
	if stops, ok := base["exit_stops"].(int); ok {
		fmt.Printf("  early exit: %d image rounds stopped drafting at the confidence bound (exit max error %g; 0 = none)\n", stops, base["exit_max_error"])
	}
	fmt.Printf("  draft-target token distance (RMS) %.3f, mean log Sigma %.3f\n", s.MeanTokenDistance, s.MeanLogSigma)
	if lossless, _ := base["lossless"].(bool); !lossless {
		fmt.Printf("  lossy: %s\n", lossyNote(base, s))
	}
}

// exitStops counts the early-exit rounds whose drafting the exit's confidence bound ended.
func exitStops(imgs []generation.Image) int {
	n := 0
	for _, im := range imgs {
		if im.Spec != nil {
			n += im.Spec.ExitStops
		}
	}
	return n
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
