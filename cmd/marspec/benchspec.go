package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"marspec/arsampler"
	"marspec/mar"
)

// specBench is `marspec bench --spec`: speculative decoding against target-only decoding,
// measured side by side in one run, over a grid of settings; then the alignment ablation.
type specBench struct {
	gammas, prefills, verifies, acceptances, batches string
	schedules                                        string
	imagesMin, ablationGamma                         int
}

func (b *specBench) add(fs *flag.FlagSet) {
	fs.StringVar(&b.gammas, "gammas", "2,4,8,16,auto", "spec: gamma values")
	fs.StringVar(&b.prefills, "prefills", "0,0.05,0.15", "spec: prefill ratios")
	fs.StringVar(&b.verifies, "verifies", "prefix,group", "spec: verification strategies")
	fs.StringVar(&b.acceptances, "acceptances", "paper,exact", "spec: acceptance criteria")
	fs.StringVar(&b.schedules, "schedules", "batched,lazy", "spec: schedules of prefix rounds (group rounds are always one pass)")
	fs.StringVar(&b.batches, "batches", "1,8,32", "spec: batch sizes (images per run = max(batch, --spec-images))")
	fs.IntVar(&b.imagesMin, "spec-images", 4, "spec: at least this many images per configuration")
	fs.IntVar(&b.ablationGamma, "ablation-gamma", 8, "spec: gamma of the alignment ablation (paper: 32)")
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
		}
		fmt.Printf("| %d | %.4f | %.4f | %.3f |\n", bs, targetSec[bs], draftSec[bs], draftSec[bs]/targetSec[bs])
	}
	fmt.Println()
	fmt.Println("| gamma | prefill | verify | schedule | acceptance | batch | alpha | mean gamma | target rows/token | s/image | measured speedup | predicted speedup |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, g := range splitList(b.gammas) {
		for _, pf := range splitList(b.prefills) {
			for _, v := range splitList(b.verifies) {
				schedules := splitList(b.schedules)
				if v != "prefix" {
					schedules = []string{"batched"}
				}
				for _, sch := range schedules {
					for _, a := range splitList(b.acceptances) {
						for _, bs := range batches {
							sf := specFlags{gamma: g, verify: v, acceptance: a, align: "on", schedule: sch, maxTries: 1000}
							var err error
							if sf.prefill, err = strconv.ParseFloat(pf, 64); err != nil {
								return fmt.Errorf("prefill %q is not a number", pf)
							}
							n := max(bs, b.imagesMin)
							sum, cfg, err := runSpecOnce(target, draft, sf, base, classesFor(n), bs)
							if err != nil {
								return err
							}
							perImage := sum.Seconds / float64(n)
							c := draftSec[bs] / targetSec[bs]
							gammaForPrediction := int(sum.MeanGamma + 0.5)
							tokens := n * target.Manifest.SeqLen()
							fmt.Printf("| %s | %s | %s | %s | %s | %d | %.3f | %.2f | %.2f | %.4f | %.2fx | %.2fx |\n",
								g, pf, v, sch, a, bs, sum.Alpha, sum.MeanGamma, float64(sum.TargetRows)/float64(tokens), perImage,
								targetSec[bs]/perImage, cfg.PredictedSpeedup(sum.Alpha, c, gammaForPrediction))
						}
					}
				}
			}
		}
	}
	fmt.Println()
	fmt.Printf("Alignment ablation (paper's Table 4), gamma %d, prefill 0.05, prefix verification, batch %d:\n\n", b.ablationGamma, batches[len(batches)-1])
	fmt.Println("| acceptance | align | alpha | RMS draft-target token distance |")
	fmt.Println("|---|---|---|---|")
	for _, a := range []string{"paper", "exact"} {
		for _, al := range []string{"off", "on"} {
			sf := specFlags{gamma: strconv.Itoa(b.ablationGamma), prefill: 0.05, verify: "prefix", acceptance: a, align: al, schedule: "lazy", maxTries: 1000}
			bs := batches[len(batches)-1]
			sum, _, err := runSpecOnce(target, draft, sf, base, classesFor(max(bs, b.imagesMin)), bs)
			if err != nil {
				return err
			}
			fmt.Printf("| %s | %s | %.3f | %.3f |\n", a, al, sum.Alpha, sum.MeanTokenDistance)
		}
	}
	return nil
}

// runSpecOnce runs one speculative configuration and returns its summary and the configuration
// it resolved to (whose cost model predicts the row's speedup).
func runSpecOnce(target, draft *mar.Model, sf specFlags, opt mar.Options, classes []int, batch int) (arsampler.Summary, arsampler.Config, error) {
	cfg, err := sf.config(opt)
	if err != nil {
		return arsampler.Summary{}, cfg, err
	}
	_, sum, err := arsampler.Generate(target, draft, cfg, classes, 0, batch)
	return sum, cfg, err
}
