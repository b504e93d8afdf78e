package main

import (
	"flag"
	"fmt"
	"os"

	"marspec/progress"
	"marspec/scoring"
)

// frontier: the flags of a frontier run (package scoring does the run).

func runFrontier(args []string) error {
	fs := flag.NewFlagSet("frontier", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	rt.addPrecisionFlag(fs)
	var s scoring.FrontierSettings
	out := fs.String("out", "", "run folder (required); an existing one is resumed")
	fs.IntVar(&s.N, "n", 2000, "images per configuration (classes cycle 0..9)")
	fs.Uint64Var(&s.Seed, "seed", 1, "seed of every configuration")
	fs.IntVar(&s.Batch, "batch", 32, "images in flight")
	fs.IntVar(&s.Chunk, "chunk", 64, "images per chunk: configurations take turns chunk by chunk, so machine noise hits all alike")
	fs.Float64Var(&s.CFG, "cfg", 1, "classifier-free guidance scale")
	fs.Float64Var(&s.Temperature, "temperature", 1, "diffusion temperature")
	fs.IntVar(&s.Steps, "steps", 0, "diffusion sampling steps of configurations that do not set steps (0 = the pack's)")
	fs.StringVar(&s.Target, "target", "target", "target pack")
	fs.StringVar(&s.Draft, "draft", "draft", "draft pack")
	configs := fs.String("configs", scoring.DefaultFrontierConfigs, "configurations, comma-separated (as for eval)")
	fs.StringVar(&s.Reference, "reference-config", "target", "the configuration others are compared with (must be in --configs)")
	refSeed := fs.Uint64("reference-seed", 0, "seed of the reference's second sample (0 = seed + 1)")
	shard := fs.String("shard", "0/1", "i/n: generate only chunks c with c mod n == i")
	evaluator := fs.String("evaluator", "evaluator", "evaluator (embedded or a folder)")
	schedule := fs.String("schedule", "auto", "prefix rounds: batched, lazy or auto (lazy on cpu)")
	reference := fs.String("reference", "", "reference statistics .npz (default: the embedded Fashion-MNIST test set)")
	quiet := addQuietFlag(fs)
	replot := fs.String("replot", "", "a finished run's folder: write its table and plot again from its frontier.json (no images needed) and stop")
	paired := fs.String("paired", "", "finished runs of one cfg at two or more seeds, comma-separated: each configuration's FID minus --reference-config's at the same seed, averaged, with the recommended preset point, and stop")
	pairedPlot := fs.String("paired-plot", "", "with --paired: also draw the report (mean paired FID against speed) into this PNG")
	pairedSpeed := fs.String("paired-speed", "", "with --paired: runs of the same cfg (any n, any seed) to take the speeds from instead, e.g. made on a quiet machine; comma-separated")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *replot != "" {
		return scoring.Replot(*replot, os.Stdout)
	}
	if *paired != "" {
		rep, err := scoring.Paired(splitList(*paired), splitList(*pairedSpeed), s.Reference)
		if err != nil {
			return fmt.Errorf("--paired: %w", err)
		}
		if *pairedPlot != "" {
			if err := rep.Plot(*pairedPlot); err != nil {
				return fmt.Errorf("--paired-plot: %w", err)
			}
		}
		return rep.Markdown(os.Stdout)
	}
	if *out == "" {
		return fmt.Errorf("--out is required (the run folder)")
	}
	if s.N < 10 || s.N > 1000000 || s.Chunk < 1 || s.Batch < 1 {
		return fmt.Errorf("--n must be 10 to 1000000, --chunk and --batch positive")
	}
	s.Configs = splitList(*configs)
	var err error
	if s.Precision, err = rt.pinnedPrecision(); err != nil {
		return fmt.Errorf("--precision: %w", err)
	}
	s.ReferenceSeed = *refSeed
	if s.ReferenceSeed == 0 {
		s.ReferenceSeed = s.Seed + 1
	}
	if s.ReferenceSeed == s.Seed {
		return fmt.Errorf("--reference-seed %d equals --seed: the second sample must be independent", s.Seed)
	}
	shardI, shardN, err := scoring.ParseShard(*shard)
	if err != nil {
		return err
	}
	run, err := scoring.OpenFrontier(packOpener{rt}, *out, s, *evaluator, *schedule)
	if err != nil {
		return err
	}
	bar := progress.New(os.Stderr, "frontier "+*out, "chunks", run.Missing(shardI, shardN), progress.Options{Quiet: *quiet})
	err = run.Generate(shardI, shardN, chunkDone(bar))
	bar.Done()
	if err != nil {
		return err
	}
	return run.Report(*reference, os.Stdout)
}
