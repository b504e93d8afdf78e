package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"marspec/arsampler"
	"marspec/generation"
	"marspec/mar"
)

// SpecGrid is `marspec bench --spec`: speculative decoding against target-only decoding,
// measured side by side in one run, over a grid of settings; then the alignment ablation.
type SpecGrid struct {
	// comma-separated lists, as the flags give them
	Gammas, Prefills, Verifies, Acceptances, Batches string
	Schedules                                        string
	Drafts, Rejections, Tolerances                   string
	ExitMaxErrors                                    string
	ImagesMin, AblationGamma                         int
}

// Run measures the grid and the ablation with target and draft and writes the tables to w;
// newBar, when set, shows progress over the runs.
func (b *SpecGrid) Run(w io.Writer, target, draft *mar.Model, steps int, newBar func(total int) Progress) error {
	batches := []int{}
	for _, s := range splitList(b.Batches) {
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
	grid, ablation, err := b.Configs()
	if err != nil {
		return err
	}
	for _, sf := range grid {
		if sf.EarlyExit && target.Exit == nil {
			return fmt.Errorf("draft exit: target pack %s has no early_exit graphs (scripts/train/early_exit.py adds them)", target.Manifest.Name)
		}
	}
	// every timed run is a step: the baselines, the grid, the ablation
	bar := startProgress(newBar, 2*len(batches)+len(grid)*len(batches)+len(ablation))
	defer bar.Done()
	// target-only and draft-only time per image at each batch size, measured in this run
	targetSec, draftSec := map[int]float64{}, map[int]float64{}
	fmt.Fprintln(w, "| batch | target-only s/image | draft-only s/image | c (draft/target) |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, bs := range batches {
		n := max(bs, b.ImagesMin)
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
		fmt.Fprintf(w, "| %d | %.4f | %.4f | %.3f |\n", bs, targetSec[bs], draftSec[bs], draftSec[bs]/targetSec[bs])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| gamma | prefill | verify | schedule | acceptance | batch | alpha | mean gamma | target rows/token | s/image | measured speedup | predicted speedup |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	var gpuRows []string
	for _, sf := range grid {
		for _, bs := range batches {
			n := max(bs, b.ImagesMin)
			d := draft
			if sf.SelfDraft || sf.EarlyExit {
				d = nil
			}
			sum, stops, cfg, err := runSpecOnce(target, d, sf, base, classesFor(n), bs)
			if err != nil {
				return err
			}
			bar.Add(1, fmt.Sprintf("gamma %s, prefill %g, %s, %s, batch %d", sf.Gamma, sf.Prefill, sf.Verify, sf.Acceptance, bs))
			perImage := sum.Seconds / float64(n)
			// the CPU prediction needs a draft network's measured cost; self-drafting's and the
			// exit's rows are costed in the GPU table below
			predicted := "–"
			if !sf.SelfDraft && !sf.EarlyExit {
				c := draftSec[bs] / targetSec[bs]
				predicted = fmt.Sprintf("%.2fx", cfg.PredictedSpeedup(sum.Alpha, c, int(sum.MeanGamma+0.5)))
			}
			gamma, accept := sf.Gamma, sf.Acceptance
			switch {
			case sf.SelfDraft:
				gamma += " (self)"
			case sf.EarlyExit && sf.ExitMaxError > 0:
				gamma += fmt.Sprintf(" (exit, max error %g)", sf.ExitMaxError)
			case sf.EarlyExit:
				gamma += " (exit)"
			}
			if k := (&generation.SpecSettings{Rejection: sf.Rejection, Tolerance: sf.Tolerance}).DescribeKnobs(); k != "" {
				accept += ", " + k
			}
			fmt.Fprintf(w, "| %s | %g | %s | %s | %s | %d | %.3f | %.2f | %.2f | %.4f | %.2fx | %s |\n",
				gamma, sf.Prefill, sf.Verify, cfg.Schedule, accept, bs, sum.Alpha, sum.MeanGamma, sum.RowsPerToken, perImage,
				targetSec[bs]/perImage, predicted)
			exitStops := "–"
			if sf.EarlyExit {
				exitStops = strconv.Itoa(stops)
			}
			gpuRows = append(gpuRows, fmt.Sprintf("| %s | %g | %s | %s | %s | %d | %.3f (%.3f to %.3f) | %.2f | %.2f | %.3f | %.2f | %.3f | %s | %.2fx |",
				gamma, sf.Prefill, sf.Verify, cfg.Schedule, accept, bs, sum.Alpha, sum.AlphaLow, sum.AlphaHigh, sum.TokensPerTarget,
				sum.RowsPerToken, sum.CostRatio, sum.DraftCallsPerRound, sum.VerifyCost, exitStops, sum.PredictedGPUSpeedup))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Predicted GPU speedup (a batched pass costs about one pass): tokens per target pass / (v + c x draft calls per round), c from this run's per-token times, v the verification pass's cost in target steps (1; less for exit drafts, whose verification runs only the blocks after the exit); exit stops: image rounds whose drafting the confidence bound ended; alpha with its %.0f%% Hoeffding interval:\n\n", 100*arsampler.AlphaConfidence)
	fmt.Fprintln(w, "| gamma | prefill | verify | schedule | acceptance | batch | alpha | tokens/target pass | target rows/token | c | draft calls/round | verify cost v | exit stops | predicted GPU speedup |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range gpuRows {
		fmt.Fprintln(w, r)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Alignment ablation (paper's Table 4), gamma %d, prefill 0.05, prefix verification, batch %d:\n\n", b.AblationGamma, batches[len(batches)-1])
	fmt.Fprintln(w, "| acceptance | align | alpha | RMS draft-target token distance |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, sf := range ablation {
		bs := batches[len(batches)-1]
		sum, _, _, err := runSpecOnce(target, draft, sf, base, classesFor(max(bs, b.ImagesMin)), bs)
		if err != nil {
			return err
		}
		bar.Add(1, "ablation: "+sf.Acceptance+", align "+sf.Align)
		fmt.Fprintf(w, "| %s | %s | %.3f | %.3f |\n", sf.Acceptance, sf.Align, sum.Alpha, sum.MeanTokenDistance)
	}
	return nil
}

// configs are the table's and the ablation's configurations, every one checked, so a typo
// in a list fails at once instead of after minutes of timing.
// Configs checks every setting of the grid and the ablation before anything is opened.
func (b *SpecGrid) Configs() (grid, ablation []generation.SpecSettings, err error) {
	if grid, err = b.grid(); err != nil {
		return nil, nil, err
	}
	ablation = b.ablation()
	for _, sf := range append(append([]generation.SpecSettings{}, grid...), ablation...) {
		if _, err := sf.Config(mar.Options{}); err != nil {
			return nil, nil, err
		}
	}
	return grid, ablation, nil
}

// ablation is the alignment ablation's configurations: both criteria, noise shared or not.
func (b *SpecGrid) ablation() []generation.SpecSettings {
	var out []generation.SpecSettings
	for _, a := range []string{"paper", "exact"} {
		for _, al := range []string{"off", "on"} {
			out = append(out, generation.SpecSettings{Gamma: strconv.Itoa(b.AblationGamma), Prefill: 0.05, Verify: "prefix", Acceptance: a, Align: al, Schedule: "lazy", MaxTries: 1000})
		}
	}
	return out
}

// grid is every speculative configuration of the bench, in table order.
func (b *SpecGrid) grid() ([]generation.SpecSettings, error) {
	var out []generation.SpecSettings
	for _, d := range splitList(b.Drafts) {
		if d != "pack" && d != generation.DraftSelf && d != generation.DraftExit {
			return nil, fmt.Errorf("draft %q unknown (allowed: pack, %s, %s)", d, generation.DraftSelf, generation.DraftExit)
		}
	}
	var bounds []float64
	for _, e := range splitList(b.ExitMaxErrors) {
		bound, err := strconv.ParseFloat(e, 64)
		if err != nil {
			return nil, fmt.Errorf("exit max error %q is not a number", e)
		}
		bounds = append(bounds, bound) // the range is checked with the configuration
	}
	wantExit := slices.Contains(splitList(b.Drafts), generation.DraftExit)
	if !wantExit && (len(bounds) != 1 || bounds[0] != 0) {
		return nil, fmt.Errorf("exit max errors %q apply to draft exit only (allowed: add exit to --drafts, or omit --exit-max-errors)", b.ExitMaxErrors)
	}
	var lambdas []float64
	for _, tol := range splitList(b.Tolerances) {
		lambda, err := strconv.ParseFloat(tol, 64)
		if err != nil {
			return nil, fmt.Errorf("tolerance %q is not a number", tol)
		}
		lambdas = append(lambdas, lambda)
	}
	exitRows := false
	for _, g := range splitList(b.Gammas) {
		for _, pf := range splitList(b.Prefills) {
			prefill, err := strconv.ParseFloat(pf, 64)
			if err != nil {
				return nil, fmt.Errorf("prefill %q is not a number", pf)
			}
			for _, v := range splitList(b.Verifies) {
				schedules := splitList(b.Schedules)
				if v != "prefix" {
					schedules = []string{"batched"}
				}
				for _, sch := range schedules {
					for _, a := range splitList(b.Acceptances) {
						for _, d := range splitList(b.Drafts) {
							exitBounds := []float64{0}
							if d == generation.DraftExit {
								if v != "prefix" || sch != "batched" {
									continue // the exit verifies prefix rounds, batched only
								}
								exitBounds, exitRows = bounds, true
							}
							for _, bound := range exitBounds {
								for _, rej := range splitList(b.Rejections) {
									for _, lambda := range lambdas {
										out = append(out, generation.SpecSettings{Gamma: g, Prefill: prefill, Verify: v, Acceptance: a, Align: "on",
											Schedule: sch, MaxTries: 1000, SelfDraft: d == generation.DraftSelf, EarlyExit: d == generation.DraftExit,
											ExitMaxError: bound, Rejection: rej, Tolerance: lambda})
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
func runSpecOnce(target, draft *mar.Model, sf generation.SpecSettings, opt mar.Options, classes []int, batch int) (arsampler.Summary, int, arsampler.Config, error) {
	cfg, err := sf.Config(opt)
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

// splitList reads a comma-separated flag value, blanks dropped.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}
