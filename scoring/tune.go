package scoring

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"marspec/diffusion"
	"marspec/generation"
	"marspec/mar"
)

// Chosen is a preset picked from a paired frontier report by one of TuneRules.
type Chosen struct {
	Name, Rule string
	Row        PairedRow
}

// TuneRules are the rules that choose a pack's presets from a paired frontier report
// (docs/FRONTIER.md), in the order they are written:
//
//   - fast: the fastest Pareto point whose mean paired FID stays within the noise floor and is
//     no worse than balanced's (the rule of the default): the default never trades quality
//     against what the pack runs without training. Within the floor alone let a point 3 to 5
//     FID worse than balanced through once the head's points all beat the one-token-per-step
//     reference (docs/results/archive-2026-11.md, "Temperature on the head and the opening memo");
//   - balanced: the fastest training-free point (no distilled head) within the noise floor that
//     no other training-free point dominates, which every pack runs; fast falls back to it
//     where it cannot run. Among the training-free points only: a head point that dominates it
//     does not remove what a pack without a head can run;
//   - quality: the Pareto point with the best mean paired FID.
//
// Only target-mode configurations are candidates.
var TuneRules = []struct {
	Name, Rule string
	pick       func(rep *PairedReport) int
}{
	{"fast", "the fastest Pareto point whose mean paired FID stays within the noise floor and is no worse than balanced's", func(rep *PairedReport) int {
		b := fastestTrainingFree(rep)
		return fastest(rep.Rows, func(r PairedRow) bool { return r.Pareto && (b < 0 || *r.MeanPaired <= *rep.Rows[b].MeanPaired) })
	}},
	{"balanced", "the fastest training-free point within the noise floor that no training-free point dominates", fastestTrainingFree},
	{"quality", "the Pareto point with the best mean paired FID", func(rep *PairedReport) int {
		best := -1
		for i, r := range rep.Rows {
			if candidate(r) && r.Pareto && (best < 0 || *r.MeanPaired < *rep.Rows[best].MeanPaired) {
				best = i
			}
		}
		return best
	}},
}

func fastestTrainingFree(rep *PairedReport) int {
	free := func(r PairedRow) bool {
		return candidate(r) && comparablePaired(r) && !strings.Contains(r.Config, "sampler="+string(diffusion.Distilled))
	}
	return fastest(rep.Rows, func(r PairedRow) bool { return free(r) && !dominatedAmong(rep.Rows, r, rep.Noise, free) })
}

// candidate is a target-mode row with a mean paired FID.
func candidate(r PairedRow) bool {
	return r.MeanPaired != nil && strings.HasPrefix(r.Config, generation.ModeTarget+":")
}

func fastest(rows []PairedRow, ok func(PairedRow) bool) int {
	best := -1
	for i, r := range rows {
		if candidate(r) && r.WithinNoise && ok(r) && (best < 0 || r.Speedup > rows[best].Speedup) {
			best = i
		}
	}
	return best
}

// Choose applies TuneRules to the report; a rule no row satisfies is left out and named.
func (rep *PairedReport) Choose() (chosen []Chosen, missing []string) {
	for _, rule := range TuneRules {
		if i := rule.pick(rep); i >= 0 {
			chosen = append(chosen, Chosen{Name: rule.Name, Rule: rule.Rule, Row: rep.Rows[i]})
		} else {
			missing = append(missing, rule.Name)
		}
	}
	return chosen, missing
}

// Presets turns the choices into presets whose about line states what was measured and whose
// provenance names the runs (as given in dirs and speedDirs) and the rule. A distilled fast
// point falls back to balanced where chosen.
func (rep *PairedReport) Presets(chosen []Chosen, dirs []string) (map[string]generation.Preset, error) {
	runs := "frontier runs " + strings.Join(dirs, ", ")
	if len(rep.SpeedFrom) > 0 {
		runs += " (speeds from " + strings.Join(rep.SpeedFrom, ", ") + ")"
	}
	seeds := make([]string, len(rep.Seeds))
	for i, s := range rep.Seeds {
		seeds[i] = fmt.Sprint(s)
	}
	measured := fmt.Sprintf("measured: %s, N = %d per configuration, cfg %g, seeds %s, mean paired FID against %s, noise floor %.2f",
		runs, rep.N, rep.CFG, strings.Join(seeds, ", "), rep.Reference, rep.Noise)
	has := map[string]bool{}
	for _, c := range chosen {
		has[c.Name] = true
	}
	out := map[string]generation.Preset{}
	for _, c := range chosen {
		p, err := generation.PresetFromRunConfig(c.Row.Config)
		if err != nil {
			return nil, fmt.Errorf("preset %s from %q: %w", c.Name, c.Row.Config, err)
		}
		within := ""
		if c.Row.WithinNoise {
			within = ", within the noise floor"
		}
		p.About = fmt.Sprintf("%s (%s): %.2fx the %s configuration, mean paired FID %+.2f%s", generation.DescribePreset(p), c.Row.Config, c.Row.Speedup, rep.Reference, *c.Row.MeanPaired, within)
		if p.Sampler == string(diffusion.Distilled) && has["balanced"] && c.Name != "balanced" {
			p.Fallback = "balanced"
			p.About += "; packs or requests the distilled head cannot serve run balanced"
		}
		p.Provenance = measured + ", rule: " + c.Rule
		out[c.Name] = p
	}
	return out, nil
}

// TuneOptions are marspec tune's: the pack folder, the paired frontier runs and how to write.
type TuneOptions struct {
	Pack             string
	Runs, Speed      []string
	Reference        string // the configuration the runs compare with
	Default          string // the preset to make the pack's default ("" keeps it)
	ReplacePublished bool
	DryRun           bool // print the settings, write nothing
}

// Tune chooses presets from the paired report of o.Runs (TuneRules), merges them into the
// pack's settings (generation.TuneSettings) and writes them into its manifest
// (mar.WriteSettings), saying on w what it chose.
func Tune(o TuneOptions, w io.Writer) error {
	man, err := mar.LoadManifest(o.Pack)
	if err != nil {
		return err
	}
	rep, err := Paired(o.Runs, o.Speed, o.Reference)
	if err != nil {
		return fmt.Errorf("--runs: %w", err)
	}
	chosen, missing := rep.Choose()
	if len(chosen) == 0 {
		return fmt.Errorf("--runs: no configuration satisfies any tuning rule (no Pareto target point with a mean paired FID)")
	}
	presets, err := rep.Presets(chosen, o.Runs)
	if err != nil {
		return err
	}
	set, err := generation.TuneSettings(man, generation.Tuned{Presets: presets, CFG: rep.CFG, Temperature: rep.Temperature}, o.Default, o.ReplacePublished)
	if err != nil {
		return err
	}
	for _, c := range chosen {
		fmt.Fprintf(w, "%s: %s (%s)\n", c.Name, c.Row.Config, c.Rule)
	}
	if len(missing) > 0 {
		fmt.Fprintf(w, "not chosen (no point satisfies the rule): %s\n", strings.Join(missing, ", "))
	}
	if o.DryRun {
		data, _ := json.MarshalIndent(set, "", "  ")
		fmt.Fprintln(w, string(data))
		return nil
	}
	if err := mar.WriteSettings(o.Pack, set); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %d presets into %s/manifest.json (default preset %s)\n", len(chosen), o.Pack, set.DefaultPreset)
	return nil
}
