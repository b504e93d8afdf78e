package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"marspec/generation"
	"marspec/mar"
)

func runModels(args []string) error {
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	rt.addPrecisionFlag(fs)
	allClasses := fs.Bool("classes", false, fmt.Sprintf("list every class (default: the first %d and a count)", generation.ShortClassList))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := generation.ValidateRuntime(rt.provider, rt.threads); err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 {
		names = []string{"target", "draft"}
	}
	var broken []string
	for _, name := range names {
		p, err := generation.LoadPack(name)
		if err != nil {
			fmt.Printf("%s: BROKEN: %v\n", name, err)
			broken = append(broken, name)
			continue
		}
		describePack(name, p, *allClasses)
		// a manifest and files that read are not enough: a truncated graph only shows when
		// ONNX Runtime loads it, so every pack is opened once
		m, err := rt.open(name)
		if err != nil {
			fmt.Printf("  BROKEN, cannot run: %v\n", err)
			broken = append(broken, name)
			continue
		}
		fmt.Println("  graphs: load in ONNX Runtime")
		cat := generation.Catalog{TargetPack: name, Target: p.Manifest, Provider: rt.provider, Precision: rt.precision}
		if _, err := generation.TellCosts(os.Stdout, "  ", m, rt.precision, cat, nil, rt.threads); err != nil {
			fmt.Printf("  cost here: not estimated: %v\n", err)
		}
	}
	if len(broken) > 0 {
		return fmt.Errorf("%d of %d model packs cannot run: %s", len(broken), len(names), strings.Join(broken, ", "))
	}
	return nil
}

// describePack writes what the pack is; its classes as a short list with a count unless all.
func describePack(name string, p *mar.Pack, all bool) {
	m := p.Manifest
	var tr struct {
		Parameters int     `json:"parameters"`
		Minutes    float64 `json:"minutes"`
	}
	_ = json.Unmarshal(m.Training, &tr) // free-form record: shown when present
	fmt.Printf("%s (%s): %s\n", name, p.Source, m.Name)
	fmt.Printf("  image %dx%dx%d, tokens %dx%d of dim %d, width %d, %d parameters, trained %.0f min\n",
		m.Image.Height, m.Image.Width, m.Image.Channels, m.Grid.Height, m.Grid.Width, m.TokenDim, m.Width, tr.Parameters, tr.Minutes)
	fmt.Printf("  diffusion: %s, %d training steps, %d sampling steps, %s variance, clip x0 %v\n",
		m.Diffusion.Schedule, m.Diffusion.TrainingSteps, m.Diffusion.SamplingSteps, m.Diffusion.Variance, m.Diffusion.ClipX0)
	fmt.Printf("  classes (%d): %s\n", len(m.Classes), generation.ClassList(m.Classes, all))
	if c := m.Cache; c != nil {
		fmt.Printf("  cache across AR steps: %s (--cache on, docs/cache.md)\n", c.File)
	}
	// every precision the pack has graphs for, fp16 among them where it has them (CUDA only)
	precisions := generation.Catalog{Provider: "cuda"}.PackPrecisions(m)
	for i, p := range precisions {
		if p == mar.FP16 {
			precisions[i] = p + " (CUDA only)"
		}
	}
	fmt.Printf("  precisions: %s (--precision, or a request's precision)\n", strings.Join(precisions, ", "))
	generation.DescribeSettings(os.Stdout, m)
}
