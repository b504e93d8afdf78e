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
	folderStats := func(e *fid.Evaluator, dir string) (*fid.Accumulator, [][]float64, error) {
		return fid.FolderStats(e, dir, folderProgress(dir, *quiet))
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
	cmp, err := fid.Compare(open, fs.Arg(0), fs.Arg(1), func(dir string) func(done, total int) {
		return folderProgress(dir, *quiet)
	})
	if err != nil {
		return err
	}
	fmt.Printf("FID %.4f\n", cmp.FID)
	fmt.Println(cmp.IS)
	return nil
}

// folderProgress says which files of dir are skipped, then draws the featurizing's progress.
func folderProgress(dir string, quiet bool) func(done, total int) {
	if _, others, err := fid.ListImages(dir); err == nil && len(others) > 0 {
		fmt.Fprintf(os.Stderr, "%s: skipped %d files that are not PNG images (%s)\n", dir, len(others), listSome(others, 3))
	}
	var bar *progress.Reporter
	return func(done, total int) {
		if bar == nil {
			bar = progress.New(os.Stderr, "features of "+dir, "images", total, progress.Options{Quiet: quiet})
		}
		bar.Add(done-bar.Count(), "")
		if done == total {
			bar.Done()
		}
	}
}

// listSome names up to n entries, then how many more.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
