package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"marspec/fid"
	"marspec/generation"
)

// runFID is `marspec fid A B` (FID between two folders of images or statistics files) and
// `marspec fid --stats DIR -o stats.npz` (reference statistics of a folder).
func runFID(args []string) error {
	fs := flag.NewFlagSet("fid", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	evaluator := fs.String("evaluator", "evaluator", "evaluator: the embedded Fashion-MNIST CNN, or a folder (docs/evaluation.md)")
	stats := fs.String("stats", "", "make statistics of this image folder (with -o)")
	outPath := fs.String("o", "", "where --stats writes its .npz")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := generation.ValidateRuntime(rt.provider, rt.threads); err != nil {
		return err
	}
	open := func() (*fid.Evaluator, error) { return openEvaluator(rt, *evaluator) }
	progress := func(done, total int) {
		if done == total || done%4096 == 0 {
			fmt.Fprintf(os.Stderr, "\rfeatures %d/%d", done, total)
		}
	}
	if *stats != "" {
		if *outPath == "" || fs.NArg() > 0 {
			return fmt.Errorf("usage: marspec fid --stats DIR -o stats.npz")
		}
		e, err := open()
		if err != nil {
			return err
		}
		acc, _, err := fid.FolderStats(e, *stats, progress)
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return err
		}
		if err := fid.WriteStats(*outPath, acc); err != nil {
			return err
		}
		fmt.Printf("wrote statistics of %d images (dimension %d) to %s\n", acc.N, acc.Dim, *outPath)
		return nil
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("usage: marspec fid A B (each a folder of PNG images or an .npz statistics file)")
	}
	var e *fid.Evaluator
	load := func(p string) (*fid.Stats, [][]float64, error) {
		if strings.HasSuffix(p, ".npz") {
			s, err := fid.ReadStats(p)
			return s, nil, err
		}
		if e == nil {
			var err error
			if e, err = open(); err != nil {
				return nil, nil, err
			}
		}
		acc, probs, err := fid.FolderStats(e, p, progress)
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return nil, nil, err
		}
		sigma, err := acc.Covariance()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", p, err)
		}
		return &fid.Stats{Mu: acc.Mean, Sigma: sigma}, probs, nil
	}
	a, probsA, err := load(fs.Arg(0))
	if err != nil {
		return err
	}
	b, _, err := load(fs.Arg(1))
	if err != nil {
		return err
	}
	d, err := fid.Frechet(a.Mu, a.Sigma, b.Mu, b.Sigma)
	if err != nil {
		return fmt.Errorf("FID between %s and %s: %v", fs.Arg(0), fs.Arg(1), err)
	}
	fmt.Printf("FID %.4f\n", d)
	if len(probsA) >= 10 {
		m, s, err := fid.ShuffledInceptionScore(probsA, 10, 0)
		if err == nil {
			fmt.Printf("IS of %s: %.4f ± %.4f (10 splits, shuffled)\n", fs.Arg(0), m, s)
		}
	}
	return nil
}
