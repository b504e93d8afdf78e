package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"marspec/generation"
	"marspec/mar"
	"marspec/scoring"
)

// tune: a paired frontier's chosen points written into a pack's manifest as its presets
// (scoring.TuneRules choose, generation.TuneSettings merges, mar.WriteSettings writes).

func runTune(args []string) error {
	fs := flag.NewFlagSet("tune", flag.ContinueOnError)
	pack := fs.String("pack", "", "the pack folder whose manifest.json gets the presets (required)")
	runs := fs.String("runs", "", "finished frontier runs of the pack at one cfg and two or more seeds, comma-separated (as frontier --paired)")
	speed := fs.String("speed", "", "runs of the same cfg to take the speeds from, comma-separated (as frontier --paired-speed)")
	reference := fs.String("reference-config", "target", "the configuration the runs compare with")
	def := fs.String("default", "", "make this preset the pack's default (default: keep the pack's; fast for a pack without settings)")
	replace := fs.Bool("replace-published", false, "replace a preset of the same name whose provenance is published (refused otherwise)")
	dry := fs.Bool("dry-run", false, "print the settings that would be written, and write nothing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *pack == "" || *runs == "" {
		return fmt.Errorf("usage: marspec tune --pack DIR --runs RUN,RUN... [--speed RUN...] (both --pack and --runs are required)")
	}
	man, err := mar.LoadManifest(*pack)
	if err != nil {
		return err
	}
	dirs := splitList(*runs)
	rep, err := scoring.Paired(dirs, splitList(*speed), *reference)
	if err != nil {
		return fmt.Errorf("--runs: %w", err)
	}
	chosen, missing := rep.Choose()
	if len(chosen) == 0 {
		return fmt.Errorf("--runs: no configuration satisfies any tuning rule (no Pareto target point with a mean paired FID)")
	}
	presets, err := rep.Presets(chosen, dirs)
	if err != nil {
		return err
	}
	set, err := generation.TuneSettings(man, generation.Tuned{Presets: presets, CFG: rep.CFG, Temperature: rep.Temperature}, *def, *replace)
	if err != nil {
		return err
	}
	for _, c := range chosen {
		fmt.Printf("%s: %s (%s)\n", c.Name, c.Row.Config, c.Rule)
	}
	if len(missing) > 0 {
		fmt.Printf("not chosen (no point satisfies the rule): %s\n", strings.Join(missing, ", "))
	}
	if *dry {
		data, _ := json.MarshalIndent(set, "", "  ")
		fmt.Println(string(data))
		return nil
	}
	if err := mar.WriteSettings(*pack, set); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %d presets into %s/manifest.json (default preset %s)\n", len(chosen), *pack, set.DefaultPreset)
	return nil
}
