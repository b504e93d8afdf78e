package main

import (
	"flag"
	"fmt"
	"os"

	"marspec/scoring"
)

// tune: the flags of writing a paired frontier's chosen presets into a pack (scoring.Tune).

func runTune(args []string) error {
	fs := flag.NewFlagSet("tune", flag.ContinueOnError)
	var o scoring.TuneOptions
	fs.StringVar(&o.Pack, "pack", "", "the pack folder whose manifest.json gets the presets (required)")
	runs := fs.String("runs", "", "finished frontier runs of the pack at one cfg and two or more seeds, comma-separated (as frontier --paired)")
	speed := fs.String("speed", "", "runs of the same cfg to take the speeds from, comma-separated (as frontier --paired-speed)")
	fs.StringVar(&o.Reference, "reference-config", "target", "the configuration the runs compare with")
	fs.StringVar(&o.Default, "default", "", "make this preset the pack's default (default: keep the pack's; fast for a pack without settings)")
	fs.BoolVar(&o.ReplacePublished, "replace-published", false, "replace a preset of the same name whose provenance is published (refused otherwise)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print the settings that would be written, and write nothing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if o.Pack == "" || *runs == "" {
		return fmt.Errorf("usage: marspec tune --pack DIR --runs RUN,RUN... [--speed RUN...] (both --pack and --runs are required)")
	}
	o.Runs, o.Speed = splitList(*runs), splitList(*speed)
	return scoring.Tune(o, os.Stdout)
}
