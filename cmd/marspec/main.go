// Command marspec generates images with MAR-style models (see README.md).
package main

import (
	"fmt"
	"os"
)

const usage = `marspec: class-conditional image generation with MAR-style models

usage:
  marspec generate [flags]   generate images (marspec generate -h for flags)
  marspec models   [flags]   list model packs and their classes
  marspec bench    [flags]   time transformer, head and generation (--spec: speculative table)
  marspec fid A B            FID between folders of images or .npz statistics (--stats DIR -o F)
  marspec eval --out RUN     offline scoring run: FID, IS, accuracy, alpha, speedup per configuration
  marspec eval merge --out RUN SHARD...   combine sharded runs
  marspec eval table [-o F] RUN...        one table from finished runs (mean ± std over seeds)
  marspec frontier --out RUN  speed vs quality: configurations interleaved, FID/IS/images/s, Pareto frontier
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "generate":
		err = runGenerate(args)
	case "models":
		err = runModels(args)
	case "bench":
		err = runBench(args)
	case "fid":
		err = runFID(args)
	case "eval":
		err = runEval(args)
	case "frontier":
		err = runFrontier(args)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("unknown command %q (allowed: generate, models, bench, fid, eval, frontier)", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "marspec:", err)
		os.Exit(1)
	}
}
