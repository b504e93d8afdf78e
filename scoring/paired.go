package scoring

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// PairedRow is one configuration across the runs of a paired report.
type PairedRow struct {
	Config string `json:"config"`
	// FID and Paired by seed: the configuration's FID, and that minus the reference's FID at the
	// same seed (the two share every per-image noise, so the difference is far less noisy than
	// either FID).
	FID    map[uint64]float64 `json:"fid"`
	Paired map[uint64]float64 `json:"paired"`
	// MeanPaired averages Paired over the seeds; only rows measured at every seed have one.
	MeanPaired *float64 `json:"mean_paired,omitempty"`
	// Speedup is images/s over the reference's, in each run holding both (chunks interleaved),
	// averaged; 0 where no run holds both.
	Speedup     float64 `json:"speedup_vs_reference"`
	SpeedRuns   int     `json:"speed_runs"`
	Pareto      bool    `json:"pareto"`
	WithinNoise bool    `json:"within_noise"`
	// VsFP32 is a reduced-precision row's mean FID minus its fp32 twin's (the same
	// configuration without precision=, same seeds); WorseThanFP32 marks a difference the
	// seeds show is real, which keeps the row off the frontier (precision_twins.go).
	VsFP32        *float64 `json:"vs_fp32,omitempty"`
	WorseThanFP32 bool     `json:"worse_than_fp32,omitempty"`
}

// PairedReport is the frontier over several runs at different seeds of one setting.
type PairedReport struct {
	Reference string   `json:"reference"`
	Seeds     []uint64 `json:"seeds"`
	CFG       float64  `json:"cfg"`
	// Temperature is the runs' diffusion temperature (one setting, like CFG).
	Temperature float64     `json:"temperature"`
	N           int         `json:"n"`
	Noise       float64     `json:"noise_floor"` // mean two-sample FID of the reference against its second sample
	Rows        []PairedRow `json:"rows"`
	Best        string      `json:"recommended,omitempty"`
	SpeedFrom   []string    `json:"speed_runs,omitempty"` // the runs speeds come from, when not the FID runs
}

// Paired reads finished frontier runs of one CFG, temperature and N at two or more seeds and
// sets every configuration against reference at the same seed: the reference's FID at a seed
// comes from a run at that seed holding it, or from a run whose own reference it is and whose
// second sample was drawn at that seed (so a seed-2 run need not sample an expensive reference
// again). The noise floor is the reference's two-sample FID; a configuration is within noise
// when its mean paired difference is at most the floor, and the recommended one is the
// fastest Pareto row within noise (speed against mean paired FID), the rule of the defaults.
//
// speedDirs, when given, are the only source of speeds: runs of the same cfg, temperature and
// target at any N and seed, made on a quiet machine, where the FID runs shared it with other
// work (their chunks interleave, but a burst of load still falls unevenly on configurations).
func Paired(dirs, speedDirs []string, reference string) (*PairedReport, error) {
	if len(dirs) < 2 {
		return nil, fmt.Errorf("--paired needs two or more run folders (one per seed), got %d", len(dirs))
	}
	runs, err := readFrontierRuns(dirs)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		if !sameSetting(runs[0].settings, r.settings) || runs[0].settings.N != r.settings.N {
			return nil, fmt.Errorf("%s and %s differ in cfg, temperature, n or target pack: a paired report compares one setting at several seeds", runs[0].dir, r.dir)
		}
	}
	speedRuns := runs
	if len(speedDirs) > 0 {
		if speedRuns, err = readFrontierRuns(speedDirs); err != nil {
			return nil, err
		}
		for _, r := range speedRuns {
			if !sameSetting(runs[0].settings, r.settings) {
				return nil, fmt.Errorf("speed run %s differs from %s in cfg, temperature or target pack", r.dir, runs[0].dir)
			}
		}
	}
	rep := &PairedReport{Reference: reference, CFG: runs[0].settings.CFG, Temperature: runs[0].settings.Temperature,
		N: runs[0].settings.N, SpeedFrom: speedDirs}
	refFID := map[uint64]float64{}
	var floors []float64
	for _, r := range runs {
		if !slices.Contains(rep.Seeds, r.settings.Seed) {
			rep.Seeds = append(rep.Seeds, r.settings.Seed)
		}
		for _, row := range r.rows {
			switch {
			case row.Config == reference:
				refFID[r.settings.Seed] = row.FID
				if r.settings.Reference == reference {
					floors = append(floors, row.TwoSampleFID)
				}
			case row.ReferenceFloor && r.settings.Reference == reference:
				refFID[r.settings.ReferenceSeed] = row.FID
			}
		}
	}
	slices.Sort(rep.Seeds)
	if len(rep.Seeds) < 2 {
		return nil, fmt.Errorf("the runs are all at seed %d: a paired report needs two or more seeds", rep.Seeds[0])
	}
	for _, seed := range rep.Seeds {
		if _, ok := refFID[seed]; !ok {
			return nil, fmt.Errorf("no FID of the reference %q at seed %d: put it in that seed's --configs, or make it a run's --reference-config with --reference-seed %d", reference, seed, seed)
		}
	}
	if len(floors) == 0 {
		return nil, fmt.Errorf("no run has %q as its --reference-config, so there is no noise floor for it", reference)
	}
	for _, f := range floors {
		rep.Noise += f / float64(len(floors))
	}

	index := map[string]int{}
	for _, r := range runs {
		for _, row := range r.rows {
			if row.ReferenceFloor {
				continue
			}
			i, ok := index[row.Config]
			if !ok {
				i = len(rep.Rows)
				index[row.Config] = i
				rep.Rows = append(rep.Rows, PairedRow{Config: row.Config, FID: map[uint64]float64{}, Paired: map[uint64]float64{}})
			}
			p := &rep.Rows[i]
			p.FID[r.settings.Seed] = row.FID
			p.Paired[r.settings.Seed] = row.FID - refFID[r.settings.Seed]
		}
	}
	for _, r := range speedRuns {
		ref := slices.IndexFunc(r.rows, func(x frontierRow) bool { return x.Config == reference })
		if ref < 0 || r.rows[ref].ImagesPerSec <= 0 {
			continue
		}
		for _, row := range r.rows {
			if i, ok := index[row.Config]; ok && !row.ReferenceFloor {
				rep.Rows[i].Speedup += row.ImagesPerSec / r.rows[ref].ImagesPerSec
				rep.Rows[i].SpeedRuns++
			}
		}
	}
	for i := range rep.Rows {
		p := &rep.Rows[i]
		if p.SpeedRuns > 0 {
			p.Speedup /= float64(p.SpeedRuns)
		}
		if len(p.Paired) == len(rep.Seeds) {
			m := 0.0
			for _, d := range p.Paired {
				m += d / float64(len(p.Paired))
			}
			p.MeanPaired = &m
			p.WithinNoise = m <= rep.Noise
		}
	}
	compareTwins(rep)
	markPaired(rep)
	return rep, nil
}

func readFrontierRuns(dirs []string) ([]frontierRun, error) {
	runs := make([]frontierRun, len(dirs))
	for i, d := range dirs {
		r, err := readFrontierRun(d)
		if err != nil {
			return nil, err
		}
		runs[i] = r
	}
	return runs, nil
}

// sameSetting says whether two runs sample the same law (cfg, temperature, target pack), so
// their FIDs pair and their speed ratios compare; N and seed may differ.
func sameSetting(a, b FrontierSettings) bool {
	return a.CFG == b.CFG && a.Temperature == b.Temperature && a.Target == b.Target
}

// comparablePaired reports whether a row has what dominance needs: a speed and a mean.
func comparablePaired(p PairedRow) bool {
	return p.MeanPaired != nil && p.SpeedRuns > 0 && !p.WorseThanFP32
}

// dominatedAmong reports whether a row of rows that in() admits dominates a (the frontier's
// rule: at least as fast, and no worse than a's mean paired FID plus the noise floor).
func dominatedAmong(rows []PairedRow, a PairedRow, noise float64, in func(PairedRow) bool) bool {
	as := func(p PairedRow) frontierRow {
		return frontierRow{ImagesPerSec: p.Speedup, configResult: configResult{FID: *p.MeanPaired}}
	}
	return slices.ContainsFunc(rows, func(b PairedRow) bool {
		return b.Config != a.Config && in(b) && dominates(as(b), as(a), noise)
	})
}

// markPaired flags the Pareto rows among those with a speed and a mean paired FID, by the
// frontier's rule (dominates, with the noise floor), and names the recommended one.
func markPaired(rep *PairedReport) {
	best := -1
	for i, a := range rep.Rows {
		if !comparablePaired(a) {
			continue
		}
		rep.Rows[i].Pareto = !dominatedAmong(rep.Rows, a, rep.Noise, comparablePaired)
		if rep.Rows[i].Pareto && a.WithinNoise && (best < 0 || a.Speedup > rep.Rows[best].Speedup) {
			best = i
		}
	}
	if best >= 0 {
		rep.Best = rep.Rows[best].Config
	}
}

// Markdown writes the report as a table, then the recommendation.
func (rep *PairedReport) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "N = %d per configuration, cfg %g, seeds %v; paired = FID minus %q's FID at the same seed; noise floor %.2f\n",
		rep.N, rep.CFG, rep.Seeds, rep.Reference, rep.Noise)
	if len(rep.SpeedFrom) > 0 {
		fmt.Fprintf(&b, "speeds from %s only\n", strings.Join(rep.SpeedFrom, ", "))
	}
	b.WriteString("\n")
	b.WriteString("| configuration | speed vs reference |")
	for _, s := range rep.Seeds {
		fmt.Fprintf(&b, " FID seed %d |", s)
	}
	for _, s := range rep.Seeds {
		fmt.Fprintf(&b, " paired, seed %d |", s)
	}
	b.WriteString(" paired, mean | Pareto | within noise |\n|---|---|")
	b.WriteString(strings.Repeat("---|", 2*len(rep.Seeds)+3) + "\n")
	num := func(m map[uint64]float64, s uint64, signed bool) string {
		v, ok := m[s]
		switch {
		case !ok:
			return "–"
		case signed:
			return signedText(v)
		}
		return fmt.Sprintf("%.2f", v)
	}
	for _, p := range rep.Rows {
		speed, mean, pareto, noise := "–", "–", "", ""
		if p.SpeedRuns > 0 {
			speed = fmt.Sprintf("%.2fx", p.Speedup)
		}
		if p.MeanPaired != nil {
			mean = signedText(*p.MeanPaired)
		}
		if p.Pareto {
			pareto = "**yes**"
		}
		if p.WithinNoise {
			noise = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s |", p.Config, speed)
		for _, s := range rep.Seeds {
			fmt.Fprintf(&b, " %s |", num(p.FID, s, false))
		}
		for _, s := range rep.Seeds {
			fmt.Fprintf(&b, " %s |", num(p.Paired, s, true))
		}
		fmt.Fprintf(&b, " %s | %s | %s |\n", mean, pareto, noise)
	}
	b.WriteString(twinNote(rep))
	if rep.Best != "" {
		fmt.Fprintf(&b, "\nFastest Pareto point with mean paired FID within the noise floor: `%s`\n", rep.Best)
	}
	writeTunePicks(&b, rep)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTunePicks adds what marspec tune would choose from this report, rule by rule: the
// presets follow TuneRules, not the fastest point within the floor printed above it, and a
// reader of the table should not have to run tune to see the difference.
func writeTunePicks(b *strings.Builder, rep *PairedReport) {
	chosen, missing := rep.Choose()
	if len(chosen)+len(missing) == 0 {
		return
	}
	b.WriteString("\nPresets by `marspec tune`'s rules:\n")
	for _, c := range chosen {
		fmt.Fprintf(b, "- %s: `%s` (%.2fx, %s): %s\n", c.Name, c.Row.Config, c.Row.Speedup, signedText(*c.Row.MeanPaired), c.Rule)
	}
	for _, name := range missing {
		fmt.Fprintf(b, "- %s: no row satisfies its rule\n", name)
	}
}

func signedText(v float64) string {
	if math.Abs(v) < 0.005 {
		return "0.00"
	}
	return fmt.Sprintf("%+.2f", v)
}
