// Command marspec generates images with MAR-style models (see README.md).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `marspec: class-conditional image generation with MAR-style models

usage:
  marspec generate [flags]   generate images (marspec generate -h for flags)
  marspec models   [flags]   list model packs (classes, presets, what an image costs here) and check their graphs
  marspec bench    [flags]   time transformer, head and generation (--spec: speculative table)
  marspec fid A B            FID between folders of images or .npz statistics (--stats DIR -o F)
  marspec eval --out RUN     offline scoring run: FID, IS, accuracy, alpha, speedup per configuration
  marspec eval merge --out RUN SHARD...   combine sharded runs
  marspec eval table [-o F] RUN...        one table from finished runs (mean ± std over seeds)
  marspec frontier --out RUN  speed vs quality: configurations interleaved, FID/IS/images/s, Pareto frontier
  marspec tune --pack DIR --runs RUN,RUN...   write the presets a paired frontier chooses into a pack's manifest
  marspec serve    [flags]   the REST API and gallery at http://127.0.0.1:8080 (docs/api.md)
  marspec loadtest [flags]   concurrent clients against a loopback server: throughput, latency, batching on vs off
  marspec store check [--repair]   orphans of a store both ways: objects without a record, records without an object
`

// errInterrupted is returned by a command stopped by Ctrl-C after it said what it kept: the
// process exits 130, as shells expect of SIGINT, with no further message.
var errInterrupted = errors.New("interrupted")

// errHelpShown is returned after -h printed a command's flags: the command succeeded.
var errHelpShown = errors.New("help shown")

// parseFlags parses a command's flags. -h prints the flags to stdout (and the command exits 0);
// a bad flag is one line naming it, with a hint where the flags are listed, not the whole
// list.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	// flags may follow the arguments too (`fid A B --quiet`), as users of most CLIs expect:
	// Go's flag package stops at the first argument, so parsing resumes after each one
	var positional []string
	for rest := args; ; {
		err := fs.Parse(rest)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Printf("usage: marspec %s [flags]\n\nflags:\n", fs.Name())
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return errHelpShown
		}
		if err != nil {
			return fmt.Errorf("%v (marspec %s -h lists the flags)", err, fs.Name())
		}
		if fs.NArg() == 0 {
			break
		}
		if n := len(rest) - fs.NArg(); n > 0 && rest[n-1] == "--" { // after "--" all are arguments
			positional = append(positional, fs.Args()...)
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

// noArgs refuses words left after a command's flags.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags come as --name value; marspec %s -h lists them)", fs.Arg(0), fs.Name())
	}
	return nil
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run is the command line without the process exit, so the exit status is one decision.
func run(args []string) int {
	if len(args) < 1 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "generate":
		err = runGenerate(rest)
	case "models":
		err = runModels(rest)
	case "bench":
		err = runBench(rest)
	case "fid":
		err = runFID(rest)
	case "eval":
		err = runEval(rest)
	case "tune":
		err = runTune(rest)
	case "frontier":
		err = runFrontier(rest)
	case "serve":
		err = runServe(rest)
	case "loadtest":
		err = runLoadtest(rest)
	case "store":
		err = runStore(rest)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return 0
	default:
		err = fmt.Errorf("unknown command %q (allowed: generate, models, bench, fid, eval, frontier, tune, serve, loadtest, store; marspec -h lists them)", cmd)
	}
	switch {
	case err == nil, errors.Is(err, errHelpShown), errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errInterrupted):
		return 130
	}
	fmt.Fprintln(os.Stderr, "marspec:", err)
	return 1
}
