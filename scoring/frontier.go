package scoring

import (
	"fmt"
	"io"
	"path/filepath"

	"marspec/fid"
)

// FrontierSettings fix a frontier run; a resumed run must use the same ones.
type FrontierSettings struct {
	Settings
	// Reference is the configuration every other one is compared with in distribution: it is
	// generated a second time at ReferenceSeed, and each configuration's FID to that second
	// sample is set beside the reference's own (the sampling-noise floor).
	Reference     string `json:"reference"`
	ReferenceSeed uint64 `json:"reference_seed"`
}

// DefaultFrontierConfigs are the frontier's configurations when none are given.
const DefaultFrontierConfigs = "target,target:num_iter=25,target:num_iter=13,target:num_iter=7,target:num_iter=4," +
	"target:num_iter=7:steps=25,target:num_iter=7:anneal=10,draft:num_iter=7," +
	"spec:verify=prefix:acceptance=exact,spec:verify=group:acceptance=exact:gamma=4"

// Frontier is a frontier run: a scoring run whose configurations take turns chunk by chunk
// (machine noise hits all alike), with the reference configuration sampled a second time at
// another seed as the noise floor, reported as speed against FID with the Pareto frontier.
type Frontier struct {
	dir      string
	settings FrontierSettings
	gens     []chunkGenerator
	ev       *fid.Evaluator
}

// OpenFrontier is Open for a frontier run.
func OpenFrontier(m Models, dir string, s FrontierSettings, evaluator, schedule string) (*Frontier, error) {
	gens, ev, err := openFrontier(m, dir, s, evaluator, schedule)
	if err != nil {
		return nil, err
	}
	return &Frontier{dir: dir, settings: s, gens: gens, ev: ev}, nil
}

// Missing is how many chunks of shard i/n are not made yet.
func (f *Frontier) Missing(shardI, shardN int) int {
	return missingChunks(f.dir, f.gens, f.settings.Chunks(), shardI, shardN)
}

// Generate makes the missing chunks of shard i/n, the configurations taking turns.
func (f *Frontier) Generate(shardI, shardN int, done func(config string, chunk int, seconds float64)) error {
	return generateInterleaved(f.dir, f.settings.Settings, f.gens, f.ev, shardI, shardN, done)
}

// Report writes frontier.json, frontier.md and frontier.png and prints the table to w.
func (f *Frontier) Report(reference string, w io.Writer) error {
	return reportFrontier(f.dir, f.settings, f.gens, f.ev, reference, w)
}

// openFrontier opens the run like eval does and adds the reference's second sample as the
// last generator.
func openFrontier(m Models, dir string, s FrontierSettings, evaluator, schedule string) ([]chunkGenerator, *fid.Evaluator, error) {
	ref := -1
	for i, c := range s.Configs {
		if c == s.Reference {
			ref = i
		}
	}
	if ref < 0 {
		return nil, nil, fmt.Errorf("--reference-config %q is not one of --configs", s.Reference)
	}
	gens, ev, err := openGenerators(m, s.Settings, evaluator, schedule)
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
func generateInterleaved(dir string, s Settings, gens []chunkGenerator, ev *fid.Evaluator, shardI, shardN int, done func(config string, chunk int, seconds float64)) error {
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
			if done != nil {
				done(g.name, c, ch.Seconds)
			}
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

func reportFrontier(dir string, s FrontierSettings, gens []chunkGenerator, ev *fid.Evaluator, reference string, w io.Writer) error {
	ref, err := loadReference(reference, ev)
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
			fmt.Fprintf(w, "%s: %d of %d chunks present; the report waits for the other shards\n", g.name, chunks-len(missing), chunks)
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
	return writeFrontierReport(dir, s, rows, ev.Manifest.Name, w)
}

// loadReference reads the reference statistics: the embedded test set's when path is "", an
// .npz of mu and sigma, or of images in ADM's arr_0 layout (scored by the run's evaluator).
func loadReference(path string, ev *fid.Evaluator) (*fid.Stats, error) {
	if path == "" {
		return embeddedReference()
	}
	return fid.ReadReference(path, func() (*fid.Evaluator, error) { return ev, nil }, nil)
}
