package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"marspec/fid"
	"marspec/generation"
	"marspec/progress"
)

// runFID is `marspec fid A B` (FID between two folders of images or statistics files) and
// `marspec fid --stats DIR -o stats.npz` (reference statistics of a folder).
func runFID(args []string) error {
	fs := flag.NewFlagSet("fid", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	evaluator := fs.String("evaluator", "evaluator", "evaluator: the embedded Fashion-MNIST CNN, or a folder (docs/evaluation.md)")
	stats := fs.String("stats", "", "make statistics of this image folder (with -o)")
	outPath := fs.String("o", "", "where --stats writes its .npz (missing folders are made)")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := generation.ValidateRuntime(rt.provider, rt.threads); err != nil {
		return err
	}
	open := func() (*fid.Evaluator, error) { return openEvaluator(rt, *evaluator) }
	// folderStats featurizes a folder with progress, first saying which files it skips
	folderStats := func(e *fid.Evaluator, dir string) (*fid.Accumulator, [][]float64, error) {
		if _, others, err := fid.ListImages(dir); err == nil && len(others) > 0 {
			fmt.Fprintf(os.Stderr, "%s: skipped %d files that are not PNG images (%s)\n", dir, len(others), listSome(others, 3))
		}
		var bar *progress.Reporter
		acc, probs, err := fid.FolderStats(e, dir, func(done, total int) {
			if bar == nil {
				bar = progress.New(os.Stderr, "features of "+dir, "images", total, progress.Options{Quiet: *quiet})
			}
			bar.Add(done-bar.Count(), "")
		})
		bar.Done()
		return acc, probs, err
	}
	if *stats != "" {
		if *outPath == "" || fs.NArg() > 0 {
			return fmt.Errorf("usage: marspec fid --stats DIR -o stats.npz")
		}
		if err := generation.CheckFileTarget("o", *outPath); err != nil {
			return err
		}
		e, err := open()
		if err != nil {
			return err
		}
		acc, _, err := folderStats(e, *stats)
		if err != nil {
			return err
		}
		var made generation.Created
		if err := made.ParentOf("o", *outPath); err != nil {
			return err
		}
		if err := fid.WriteStats(*outPath, acc); err != nil {
			made.Undo()
			return err
		}
		fmt.Printf("wrote statistics of %d images (dimension %d) to %s\n", acc.N, acc.Dim, *outPath)
		return nil
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("usage: marspec fid A B (each a folder of PNG images or an .npz of statistics (mu, sigma) or of images (arr_0, ADM's reference batches))")
	}
	var e *fid.Evaluator
	// the evaluator opens once, and only for a folder or an .npz of images (ADM's arr_0)
	opened := func() (*fid.Evaluator, error) {
		if e == nil {
			var err error
			if e, err = open(); err != nil {
				return nil, err
			}
		}
		return e, nil
	}
	load := func(p string) (*fid.Stats, [][]float64, error) {
		if strings.HasSuffix(p, ".npz") {
			var bar *progress.Reporter
			s, err := fid.ReadReference(p, opened, func(done, total int) {
				if bar == nil {
					bar = progress.New(os.Stderr, "features of "+p+" arr_0", "images", total, progress.Options{Quiet: *quiet})
				}
				bar.Add(done-bar.Count(), "")
			})
			bar.Done()
			return s, nil, err
		}
		if _, err := opened(); err != nil {
			return nil, nil, err
		}
		acc, probs, err := folderStats(e, p)
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
	fmt.Println(inceptionScoreLine(fs.Arg(0), probsA))
	return nil
}

// isSplits is how many parts IS averages over, as the field reports it.
const isSplits = 10

// inceptionScoreLine is IS of the first folder, or why it is left out.
func inceptionScoreLine(name string, probs [][]float64) string {
	switch {
	case strings.HasSuffix(name, ".npz"):
		return fmt.Sprintf("IS left out: %s is a statistics file, and IS needs each image's class probabilities", name)
	case len(probs) < isSplits:
		return fmt.Sprintf("IS left out: %s has %d images, and IS needs at least %d (one per split)", name, len(probs), isSplits)
	}
	m, s, err := fid.ShuffledInceptionScore(probs, isSplits, 0)
	if err != nil {
		return fmt.Sprintf("IS left out: %v", err)
	}
	return fmt.Sprintf("IS of %s: %.4f ± %.4f (%d splits, shuffled)", name, m, s, isSplits)
}

// listSome names up to n entries, then how many more.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
