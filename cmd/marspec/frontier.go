package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"marspec/fid"
	"marspec/progress"
)

// frontierSettings fix a frontier run; a resumed run must use the same ones.
type frontierSettings struct {
	evalSettings
	// Reference is the configuration every other one is compared with in distribution: it is
	// generated a second time at ReferenceSeed, and each configuration's FID to that second
	// sample is set beside the reference's own (the sampling-noise floor).
	Reference     string `json:"reference"`
	ReferenceSeed uint64 `json:"reference_seed"`
}

const defaultFrontierConfigs = "target,target:num_iter=25,target:num_iter=13,target:num_iter=7,target:num_iter=4," +
	"target:num_iter=7:steps=25,target:num_iter=7:anneal=10,draft:num_iter=7," +
	"spec:verify=prefix:acceptance=exact,spec:verify=group:acceptance=exact:gamma=4"

func runFrontier(args []string) error {
	fs := flag.NewFlagSet("frontier", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	var s frontierSettings
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
	configs := fs.String("configs", defaultFrontierConfigs, "configurations, comma-separated (as for eval)")
	fs.StringVar(&s.Reference, "reference-config", "target", "the configuration others are compared with (must be in --configs)")
	refSeed := fs.Uint64("reference-seed", 0, "seed of the reference's second sample (0 = seed + 1)")
	shard := fs.String("shard", "0/1", "i/n: generate only chunks c with c mod n == i")
	evaluator := fs.String("evaluator", "evaluator", "evaluator (embedded or a folder)")
	schedule := fs.String("schedule", "auto", "prefix rounds: batched, lazy or auto (lazy on cpu)")
	reference := fs.String("reference", "", "reference statistics .npz (default: the embedded Fashion-MNIST test set)")
	quiet := addQuietFlag(fs)
	replot := fs.String("replot", "", "a finished run's folder: write its table and plot again from its frontier.json (no images needed) and stop")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *replot != "" {
		return replotFrontier(*replot)
	}
	if *out == "" {
		return fmt.Errorf("--out is required (the run folder)")
	}
	if s.N < 10 || s.N > 1000000 || s.Chunk < 1 || s.Batch < 1 {
		return fmt.Errorf("--n must be 10 to 1000000, --chunk and --batch positive")
	}
	s.Configs = splitList(*configs)
	s.ReferenceSeed = *refSeed
	if s.ReferenceSeed == 0 {
		s.ReferenceSeed = s.Seed + 1
	}
	if s.ReferenceSeed == s.Seed {
		return fmt.Errorf("--reference-seed %d equals --seed: the second sample must be independent", s.Seed)
	}
	shardI, shardN, err := parseShard(*shard)
	if err != nil {
		return err
	}
	gens, ev, err := openFrontier(rt, *out, s, *evaluator, *schedule)
	if err != nil {
		return err
	}
	bar := progress.New(os.Stderr, "frontier "+*out, "chunks", missingChunks(*out, gens, (s.N+s.Chunk-1)/s.Chunk, shardI, shardN), progress.Options{Quiet: *quiet})
	err = generateInterleaved(*out, s.evalSettings, gens, ev, shardI, shardN, bar)
	bar.Done()
	if err != nil {
		return err
	}
	return reportFrontier(*out, s, gens, ev, *reference)
}

// openFrontier opens the run like eval does and adds the reference's second sample as the
// last generator.
func openFrontier(rt *runtimeFlags, dir string, s frontierSettings, evaluator, schedule string) ([]chunkGenerator, *fid.Evaluator, error) {
	ref := -1
	for i, c := range s.Configs {
		if c == s.Reference {
			ref = i
		}
	}
	if ref < 0 {
		return nil, nil, fmt.Errorf("--reference-config %q is not one of --configs", s.Reference)
	}
	gens, ev, err := openGenerators(rt, s.evalSettings, evaluator, schedule)
	if err != nil {
		return nil, nil, err
	}
	second := gens[ref].withSeed(s.ReferenceSeed)
	gens = append(gens, second)
	for i := range gens {
		gens[i].dir = dir
	}
	if err := checkRunSettings(dir, s); err != nil {
		return nil, nil, err
	}
	return gens, ev, nil
}

// withSeed is the same configuration sampled from another seed, in its own folder.
func (g chunkGenerator) withSeed(seed uint64) chunkGenerator {
	g.opt.Seed = seed
	if g.spec != nil {
		cfg := *g.spec
		cfg.Sampling.Seed = seed
		g.spec = &cfg
	}
	g.name = fmt.Sprintf("%s@seed%d", g.name, seed)
	g.desc = fmt.Sprintf("%s (seed %d)", g.desc, seed)
	return g
}

// generateInterleaved makes every missing chunk, chunk index by chunk index, the
// configurations taking turns (their order rotating), so that a slower or busier stretch of
// the machine's time is shared by all of them instead of falling on one.
func generateInterleaved(dir string, s evalSettings, gens []chunkGenerator, ev *fid.Evaluator, shardI, shardN int, bar *progress.Reporter) error {
	chunks := (s.N + s.Chunk - 1) / s.Chunk
	for c := shardI; c < chunks; c += shardN {
		for k := range gens {
			g := gens[(k+c)%len(gens)]
			if fid.HasChunk(dir, g.name, c) {
				continue
			}
			ch, err := g.run(c, ev)
			if err != nil {
				return fmt.Errorf("%s chunk %d: %v", g.name, c, err)
			}
			if err := fid.WriteChunk(dir, g.name, ch); err != nil {
				return err
			}
			bar.Add(1, fmt.Sprintf("%s chunk %d (%.1f s)", g.name, c, ch.Seconds))
		}
	}
	return nil
}

// frontierRow is one configuration's place on the speed-quality plane.
type frontierRow struct {
	configResult
	Config         string  `json:"config"`
	ImagesPerSec   float64 `json:"images_per_second"`
	TwoSampleFID   float64 `json:"fid_to_reference_second_sample"`
	Pareto         bool    `json:"pareto"`
	WithinNoise    bool    `json:"fid_within_noise_of_reference"`
	SpeedupVsRef   float64 `json:"speedup_vs_reference"`
	ReferenceFloor bool    `json:"reference_second_sample,omitempty"`
}

func reportFrontier(dir string, s frontierSettings, gens []chunkGenerator, ev *fid.Evaluator, reference string) error {
	ref, err := loadReference(reference)
	if err != nil {
		return err
	}
	chunks := (s.N + s.Chunk - 1) / s.Chunk
	rows := make([]frontierRow, len(gens))
	stats := make([]*fid.Stats, len(gens))
	for i, g := range gens {
		chs, missing, err := fid.ReadChunks(dir, g.name, chunks)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			fmt.Printf("%s: %d of %d chunks present; the report waits for the other shards\n", g.name, chunks-len(missing), chunks)
			return nil
		}
		res, err := scoreConfig(g, chs, ev.Manifest.Features.Dim, ref)
		if err != nil {
			return err
		}
		rows[i] = frontierRow{configResult: res, ImagesPerSec: 1 / res.SecondsImage}
		if i < len(s.Configs) {
			rows[i].Config = s.Configs[i]
		}
		if stats[i], err = fid.ReadStats(filepath.Join(dir, g.name+"-stats.npz")); err != nil {
			return err
		}
	}
	second := len(gens) - 1
	rows[second].ReferenceFloor = true
	rows[second].Config = s.Reference + fmt.Sprintf(" (seed %d)", s.ReferenceSeed)
	for i := range rows {
		if rows[i].TwoSampleFID, err = fid.Frechet(stats[i].Mu, stats[i].Sigma, stats[second].Mu, stats[second].Sigma); err != nil {
			return err
		}
	}
	markFrontier(rows[:second], s)
	return writeFrontierReport(dir, s, rows, ev.Manifest.Name)
}

func loadReference(path string) (*fid.Stats, error) {
	if path == "" {
		return embeddedReference()
	}
	return fid.ReadStats(path)
}
