package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"marspec/arsampler"
	"marspec/mar"
	"marspec/progress"
)

// specBench is `marspec bench --spec`: speculative decoding against target-only decoding,
// measured side by side in one run, over a grid of settings; then the alignment ablation.
type specBench struct {
	gammas, prefills, verifies, acceptances, batches string
	schedules                                        string
	drafts, rejections, tolerances                   string
	exitMaxErrors                                    string
	imagesMin, ablationGamma                         int
	quiet                                            bool
}

func (b *specBench) add(fs *flag.FlagSet) {
	fs.StringVar(&b.gammas, "gammas", "2,4,8,16,auto", "spec: gamma values")
	fs.StringVar(&b.prefills, "prefills", "0,0.05,0.15", "spec: prefill ratios")
	fs.StringVar(&b.verifies, "verifies", "prefix,group", "spec: verification strategies")
	fs.StringVar(&b.acceptances, "acceptances", "paper,exact", "spec: acceptance criteria")
	fs.StringVar(&b.schedules, "schedules", "batched,lazy", "spec: schedules of prefix rounds (group rounds are always one pass)")
	fs.StringVar(&b.batches, "batches", "1,8,32", "spec: batch sizes (images per run = max(batch, --spec-images))")
	fs.StringVar(&b.drafts, "drafts", "pack", "spec: draft sources: pack (the --draft pack), self (the target drafting from its own previous pass), exit (the target's first blocks plus its trained exit; prefix + batched rows only)")
	fs.StringVar(&b.exitMaxErrors, "exit-max-errors", "0", "spec, draft exit: confidence bounds (predicted RMS error of the exit at which drafting stops; 0 = none)")
	fs.StringVar(&b.rejections, "rejections", "residual", "spec: what replaces a rejected draft: residual and/or target")
	fs.StringVar(&b.tolerances, "tolerances", "0", "spec: acceptance tolerances in nats (0 = off)")
	fs.IntVar(&b.imagesMin, "spec-images", 4, "spec: at least this many images per configuration")
	fs.IntVar(&b.ablationGamma, "ablation-gamma", 8, "spec: gamma of the alignment ablation (paper: 32)")
	fs.BoolVar(&b.quiet, "quiet", false, "no progress on stderr (a bar on a terminal, a line per run otherwise)")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (b *specBench) run(target, draft *mar.Model, steps int) error {
	batches := []int{}
	for _, s := range splitList(b.batches) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("batch %q is not a positive number", s)
		}
		batches = append(batches, n)
	}
	classesFor := func(n int) []int {
		cs := make([]int, n)
		for i := range cs {
			cs[i] = i % len(target.Manifest.Classes)
		}
		return cs
	}
	base := mar.Options{Seed: 1, Steps: steps, FinalStepNoise: true}
	grid, ablation, err := b.configs()
	if err != nil {
		return err
	}
	for _, sf := range grid {
		if sf.earlyExit && target.Exit == nil {
			return fmt.Errorf("draft exit: target pack %s has no early_exit graphs (scripts/early_exit.py adds them)", target.Manifest.Name)
		}
	}
	// every timed run is a step: the baselines, the grid, the ablation
	bar := progress.New(os.Stderr, "bench --spec", "runs", 2*len(batches)+len(grid)*len(batches)+len(ablation), progress.Options{Quiet: b.quiet})
	defer bar.Done()
	// target-only and draft-only time per image at each batch size, measured in this run
	targetSec, draftSec := map[int]float64{}, map[int]float64{}
	fmt.Println("| batch | target-only s/image | draft-only s/image | c (draft/target) |")
	fmt.Println("|---|---|---|---|")
	for _, bs := range batches {
		n := max(bs, b.imagesMin)
		for _, mm := range []struct {
			m   *mar.Model
			out map[int]float64
		}{{target, targetSec}, {draft, draftSec}} {
			opt := base
			opt.Batch = bs
			start := time.Now()
			if _, err := mm.m.Generate(classesFor(n), opt); err != nil {
				return err
			}
			mm.out[bs] = time.Since(start).Seconds() / float64(n)
			bar.Add(1, fmt.Sprintf("%s alone, batch %d", mm.m.Manifest.Name, bs))
		}
		fmt.Printf("| %d | %.4f | %.4f | %.3f |\n", bs, targetSec[bs], draftSec[bs], draftSec[bs]/targetSec[bs])
	}
	fmt.Println()
	fmt.Println("| gamma | prefill | verify | schedule | acceptance | batch | alpha | mean gamma | target rows/token | s/image | measured speedup | predicted speedup |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	var gpuRows []string
	for _, sf := range grid {
		for _, bs := range batches {
			n := max(bs, b.imagesMin)
			d := draft
			if sf.selfDraft || sf.earlyExit {
				d = nil
			}
			sum, stops, cfg, err := runSpecOnce(target, d, sf, base, classesFor(n), bs)
			if err != nil {
				return err
			}
			bar.Add(1, fmt.Sprintf("gamma %s, prefill %g, %s, %s, batch %d", sf.gamma, sf.prefill, sf.verify, sf.acceptance, bs))
			perImage := sum.Seconds / float64(n)
			// the CPU prediction needs a draft network's measured cost; self-drafting's and the
			// exit's rows are costed in the GPU table below
			predicted := "–"
			if !sf.selfDraft && !sf.earlyExit {
				c := draftSec[bs] / targetSec[bs]
				predicted = fmt.Sprintf("%.2fx", cfg.PredictedSpeedup(sum.Alpha, c, int(sum.MeanGamma+0.5)))
			}
			gamma, accept := sf.gamma, sf.acceptance
			switch {
			case sf.selfDraft:
				gamma += " (self)"
			case sf.earlyExit && sf.exitMaxError > 0:
				gamma += fmt.Sprintf(" (exit, max error %g)", sf.exitMaxError)
			case sf.earlyExit:
				gamma += " (exit)"
			}
			if k := (&specFlags{rejection: sf.rejection, tolerance: sf.tolerance}).describeKnobs(); k != "" {
				accept += ", " + k
			}
			fmt.Printf("| %s | %g | %s | %s | %s | %d | %.3f | %.2f | %.2f | %.4f | %.2fx | %s |\n",
				gamma, sf.prefill, sf.verify, cfg.Schedule, accept, bs, sum.Alpha, sum.MeanGamma, sum.RowsPerToken, perImage,
				targetSec[bs]/perImage, predicted)
			exitStops := "–"
			if sf.earlyExit {
				exitStops = strconv.Itoa(stops)
			}
			gpuRows = append(gpuRows, fmt.Sprintf("| %s | %g | %s | %s | %s | %d | %.3f (%.3f to %.3f) | %.2f | %.2f | %.3f | %.2f | %.3f | %s | %.2fx |",
				gamma, sf.prefill, sf.verify, cfg.Schedule, accept, bs, sum.Alpha, sum.AlphaLow, sum.AlphaHigh, sum.TokensPerTarget,
				sum.RowsPerToken, sum.CostRatio, sum.DraftCallsPerRound, sum.VerifyCost, exitStops, sum.PredictedGPUSpeedup))
		}
	}
	fmt.Println()
	fmt.Printf("Predicted GPU speedup (a batched pass costs about one pass): tokens per target pass / (v + c x draft calls per round), c from this run's per-token times, v the verification pass's cost in target steps (1; less for exit drafts, whose verification runs only the blocks after the exit); exit stops: image rounds whose drafting the confidence bound ended; alpha with its %.0f%% Hoeffding interval:\n\n", 100*arsampler.AlphaConfidence)
	fmt.Println("| gamma | prefill | verify | schedule | acceptance | batch | alpha | tokens/target pass | target rows/token | c | draft calls/round | verify cost v | exit stops | predicted GPU speedup |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range gpuRows {
		fmt.Println(r)
	}
	fmt.Println()
	fmt.Printf("Alignment ablation (paper's Table 4), gamma %d, prefill 0.05, prefix verification, batch %d:\n\n", b.ablationGamma, batches[len(batches)-1])
	fmt.Println("| acceptance | align | alpha | RMS draft-target token distance |")
	fmt.Println("|---|---|---|---|")
	for _, sf := range ablation {
		bs := batches[len(batches)-1]
		sum, _, _, err := runSpecOnce(target, draft, sf, base, classesFor(max(bs, b.imagesMin)), bs)
		if err != nil {
			return err
		}
		bar.Add(1, "ablation: "+sf.acceptance+", align "+sf.align)
		fmt.Printf("| %s | %s | %.3f | %.3f |\n", sf.acceptance, sf.align, sum.Alpha, sum.MeanTokenDistance)
	}
	return nil
}

// configs are the table's and the ablation's configurations, every one checked, so a typo
// in a list fails at once instead of after minutes of timing.
func (b *specBench) configs() (grid, ablation []specFlags, err error) {
	if grid, err = b.grid(); err != nil {
		return nil, nil, err
	}
	ablation = b.ablation()
	for _, sf := range append(append([]specFlags{}, grid...), ablation...) {
		if _, err := sf.config(mar.Options{}); err != nil {
			return nil, nil, err
		}
	}
	return grid, ablation, nil
}

// ablation is the alignment ablation's configurations: both criteria, noise shared or not.
func (b *specBench) ablation() []specFlags {
	var out []specFlags
	for _, a := range []string{"paper", "exact"} {
		for _, al := range []string{"off", "on"} {
			out = append(out, specFlags{gamma: strconv.Itoa(b.ablationGamma), prefill: 0.05, verify: "prefix", acceptance: a, align: al, schedule: "lazy", maxTries: 1000})
		}
	}
	return out
}

// grid is every speculative configuration of the bench, in table order.
func (b *specBench) grid() ([]specFlags, error) {
	var out []specFlags
	for _, d := range splitList(b.drafts) {
		if d != "pack" && d != selfDraftName && d != exitDraftName {
			return nil, fmt.Errorf("draft %q unknown (allowed: pack, %s, %s)", d, selfDraftName, exitDraftName)
		}
	}
	var bounds []float64
	for _, e := range splitList(b.exitMaxErrors) {
		bound, err := strconv.ParseFloat(e, 64)
		if err != nil {
			return nil, fmt.Errorf("exit max error %q is not a number", e)
		}
		bounds = append(bounds, bound) // the range is checked with the configuration
	}
	wantExit := slices.Contains(splitList(b.drafts), exitDraftName)
	if !wantExit && (len(bounds) != 1 || bounds[0] != 0) {
		return nil, fmt.Errorf("exit max errors %q apply to draft exit only (allowed: add exit to --drafts, or omit --exit-max-errors)", b.exitMaxErrors)
	}
	var lambdas []float64
	for _, tol := range splitList(b.tolerances) {
		lambda, err := strconv.ParseFloat(tol, 64)
		if err != nil {
			return nil, fmt.Errorf("tolerance %q is not a number", tol)
		}
		lambdas = append(lambdas, lambda)
	}
	exitRows := false
	for _, g := range splitList(b.gammas) {
		for _, pf := range splitList(b.prefills) {
			prefill, err := strconv.ParseFloat(pf, 64)
			if err != nil {
				return nil, fmt.Errorf("prefill %q is not a number", pf)
			}
			for _, v := range splitList(b.verifies) {
				schedules := splitList(b.schedules)
				if v != "prefix" {
					schedules = []string{"batched"}
				}
				for _, sch := range schedules {
					for _, a := range splitList(b.acceptances) {
						for _, d := range splitList(b.drafts) {
							exitBounds := []float64{0}
							if d == exitDraftName {
								if v != "prefix" || sch != "batched" {
									continue // the exit verifies prefix rounds, batched only
								}
								exitBounds, exitRows = bounds, true
							}
							for _, bound := range exitBounds {
								for _, rej := range splitList(b.rejections) {
									for _, lambda := range lambdas {
										out = append(out, specFlags{gamma: g, prefill: prefill, verify: v, acceptance: a, align: "on",
											schedule: sch, maxTries: 1000, selfDraft: d == selfDraftName, earlyExit: d == exitDraftName,
											exitMaxError: bound, rejection: rej, tolerance: lambda})
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if wantExit && !exitRows {
		return nil, fmt.Errorf("draft exit verifies prefix rounds, batched only (allowed: prefix in --verifies and batched in --schedules)")
	}
	return out, nil
}

// runSpecOnce runs one speculative configuration and returns its summary, the rounds the exit's
// confidence bound ended (draft exit) and the configuration it resolved to (whose cost model
// predicts the row's speedup).
func runSpecOnce(target, draft *mar.Model, sf specFlags, opt mar.Options, classes []int, batch int) (arsampler.Summary, int, arsampler.Config, error) {
	cfg, err := sf.config(opt)
	if err != nil {
		return arsampler.Summary{}, 0, cfg, err
	}
	res, sum, err := arsampler.Generate(target, draft, cfg, classes, 0, batch)
	stops := 0
	for _, r := range res {
		stops += r.Stats.ExitStops
	}
	return sum, stops, cfg, err
}
