package main

import (
	"flag"
	"fmt"
	"os"

	"marspec/scoring"
)

// runEvalTable combines finished scoring runs (one per seed and guidance scale) into the
// paper's Table 3 layout: one table per guidance scale, one row per configuration, mean ± std
// over the seeds that ran it.
func runEvalTable(args []string) error {
	fs := flag.NewFlagSet("eval table", flag.ContinueOnError)
	out := fs.String("o", "", "write the Markdown here instead of standard output")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("usage: marspec eval table [-o FILE] RUN...  (run folders with a report.json)")
	}
	md, err := scoring.Table(fs.Args())
	if err != nil {
		return err
	}
	if *out == "" {
		fmt.Print(md)
		return nil
	}
	return os.WriteFile(*out, []byte(md), 0o644)
}
