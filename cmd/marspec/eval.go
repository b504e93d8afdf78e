package main

import (
	"flag"
	"fmt"
	"os"

	"marspec/fid"
	"marspec/generation"
	"marspec/mar"
	"marspec/progress"
	"marspec/scoring"
)

// eval: the flags of a scoring run (package scoring does the run).

func runEval(args []string) error {
	if len(args) > 0 && args[0] == "merge" {
		return runEvalMerge(args[1:])
	}
	if len(args) > 0 && args[0] == "table" {
		return runEvalTable(args[1:])
	}
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	rt.addPrecisionFlag(fs)
	var s scoring.Settings
	out := fs.String("out", "", "run folder (required); an existing one is resumed")
	fs.IntVar(&s.N, "n", 2000, "images per configuration (classes cycle over the target's); with --protocol: 50 per class unless given")
	fs.Uint64Var(&s.Seed, "seed", 1, "seed of every configuration")
	fs.IntVar(&s.Batch, "batch", 32, "images in flight")
	fs.IntVar(&s.Chunk, "chunk", 64, "images per chunk (the unit of resuming and sharding)")
	fs.Float64Var(&s.CFG, "cfg", 1, "classifier-free guidance scale")
	fs.Float64Var(&s.Temperature, "temperature", 1, "diffusion temperature")
	fs.IntVar(&s.Steps, "steps", 0, "diffusion sampling steps (0 = the pack's)")
	fs.StringVar(&s.Target, "target", "target", "target pack")
	fs.StringVar(&s.Draft, "draft", "draft", "draft pack")
	configs := fs.String("configs", scoring.DefaultConfigs, "configurations, comma-separated: target[:key=value...] and draft[:...] with keys "+generation.RunConfigKeysTarget+"; spec[:...] with keys "+generation.RunConfigKeysSpec)
	shard := fs.String("shard", "0/1", "i/n: generate only chunks c with c mod n == i")
	evaluator := fs.String("evaluator", "evaluator", "evaluator (embedded or a folder)")
	schedule := fs.String("schedule", "auto", "prefix rounds: batched, lazy or auto (lazy on cpu); the images are the same, only the cost differs, so it is not part of the run's settings")
	reference := fs.String("reference", "", "reference statistics .npz (default: the embedded Fashion-MNIST test set)")
	protocol := fs.String("protocol", "", "reproduce a published evaluation setting for setting: mar (50 images per class, the target pack's paper-evaluation preset; needs --evaluator and --reference); a smaller --n is a first look")
	quiet := addQuietFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := generation.ValidateRuntime(rt.provider, rt.threads); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required (the run folder)")
	}
	if s.N < 10 || s.N > 1000000 || s.Chunk < 1 || s.Batch < 1 {
		return fmt.Errorf("--n must be 10 to 1000000, --chunk and --batch positive")
	}
	s.Configs = splitList(*configs)
	var err error
	if *protocol != "" {
		var given []string
		fs.Visit(func(f *flag.Flag) { given = append(given, f.Name) })
		if err := scoring.ApplyProtocol(*protocol, &s, given, *evaluator, *reference, os.Stdout); err != nil {
			return err
		}
	}
	if s.Precision, err = rt.pinnedPrecision(); err != nil {
		return fmt.Errorf("--precision: %w", err)
	}
	shardI, shardN, err := scoring.ParseShard(*shard)
	if err != nil {
		return err
	}
	run, err := scoring.Open(packOpener{rt}, *out, s, *evaluator, *schedule)
	if err != nil {
		return err
	}
	bar := progress.New(os.Stderr, "eval "+*out, "chunks", run.Missing(shardI, shardN), progress.Options{Quiet: *quiet})
	err = run.Generate(shardI, shardN, chunkDone(bar))
	bar.Done()
	if err != nil {
		return err
	}
	return run.Report(*reference, os.Stdout)
}

// chunkDone reports each chunk a run makes to the progress bar.
func chunkDone(bar *progress.Reporter) func(string, int, float64) {
	return func(config string, chunk int, seconds float64) {
		bar.Add(1, fmt.Sprintf("%s chunk %d (%.1f s)", config, chunk, seconds))
	}
}

// packOpener opens a run's packs and evaluator with the command's runtime flags.
type packOpener struct{ rt *runtimeFlags }

func (m packOpener) Open(pack, precision string) (*mar.Model, error) {
	return m.rt.openAt(pack, precision)
}
func (m packOpener) OpenEvaluator(name string) (*fid.Evaluator, error) {
	return openEvaluator(m.rt, name)
}
func (m packOpener) Provider() string { return m.rt.provider }

// addQuietFlag is --quiet of the long commands.
func addQuietFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("quiet", false, "no progress on stderr (a bar on a terminal, a line per chunk otherwise)")
}

func openEvaluator(rt *runtimeFlags, name string) (*fid.Evaluator, error) {
	opt, err := rt.sessionOptions()
	if err != nil {
		return nil, err
	}
	return generation.OpenEvaluator(name, opt)
}

// runEvalMerge copies the chunk records of shard run folders into one run folder and reports.
func runEvalMerge(args []string) error {
	fs := flag.NewFlagSet("eval merge", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	out := fs.String("out", "", "the merged run folder")
	evaluator := fs.String("evaluator", "evaluator", "evaluator (embedded or a folder)")
	reference := fs.String("reference", "", "reference statistics .npz (default: the embedded test set)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("usage: marspec eval merge --out RUN SHARD_RUN...")
	}
	return scoring.Merge(packOpener{rt}, *out, fs.Args(), *evaluator, *reference, os.Stdout)
}
