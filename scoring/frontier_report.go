package scoring

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"marspec/render"
)

// markFrontier flags the Pareto-optimal rows, the rows whose FID is within the sampling noise
// of the reference's, and each row's speed relative to the reference. The noise scale is the
// two-sample FID between the reference and its own second sample: what two runs of one
// sampler differ by at this N. Pareto uses the same scale: a row is dominated by one at least
// as fast whose FID is not worse by more than the noise (and which is faster, or has the
// lower FID at equal speed), so a much slower row is not kept on the frontier for an FID
// lower by less than two runs of one sampler differ. Without a reference the noise is 0 and
// the rule is the raw one.
func markFrontier(rows []frontierRow, s FrontierSettings) {
	ref := referenceRow(rows, s)
	noise := 0.0
	if ref != nil {
		noise = ref.TwoSampleFID
	}
	for i := range rows {
		a := &rows[i]
		a.Pareto = true
		for j, b := range rows {
			if i != j && dominates(b, *a, noise) {
				a.Pareto = false
				break
			}
		}
		if ref != nil {
			a.WithinNoise = a.FID <= ref.FID+noise
			a.SpeedupVsRef = a.ImagesPerSec / ref.ImagesPerSec
		}
	}
}

// dominates says b is at least as good a choice as a: at least as fast, FID at most noise
// worse, and strictly better in one of the two (faster, or lower FID at equal speed).
func dominates(b, a frontierRow, noise float64) bool {
	if b.ImagesPerSec < a.ImagesPerSec || b.FID > a.FID+noise {
		return false
	}
	return b.ImagesPerSec > a.ImagesPerSec || b.FID < a.FID
}

// noiseOf is the reference's two-sample FID (0 without a reference).
func noiseOf(rows []frontierRow, s FrontierSettings) float64 {
	if ref := referenceRow(rows, s); ref != nil {
		return ref.TwoSampleFID
	}
	return 0
}

func referenceRow(rows []frontierRow, s FrontierSettings) *frontierRow {
	for i := range rows {
		if rows[i].Config == s.Reference {
			return &rows[i]
		}
	}
	return nil
}

// recommended is the fastest Pareto-optimal row whose FID is within the reference's noise:
// the rule by which marspec's defaults are chosen (docs/FRONTIER.md).
func recommended(rows []frontierRow) *frontierRow {
	var best *frontierRow
	for i := range rows {
		r := &rows[i]
		if r.Pareto && r.WithinNoise && (best == nil || r.ImagesPerSec > best.ImagesPerSec) {
			best = r
		}
	}
	return best
}

func frontierTable(s FrontierSettings, rows []frontierRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "N = %d images per configuration, seed %d, cfg %g, temperature %g, batch %d; reference %q, second sample at seed %d\n\n",
		s.N, s.Seed, s.CFG, s.Temperature, s.Batch, s.Reference, s.ReferenceSeed)
	b.WriteString("| configuration | images/s | speed vs reference | FID | IS | class accuracy | alpha | FID to reference (2nd sample) | Pareto | FID within noise |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		alpha := "–"
		if r.Alpha != nil {
			alpha = fmt.Sprintf("%.3f", *r.Alpha)
		}
		pareto, noise, speed := "", "", fmt.Sprintf("%.2fx", r.SpeedupVsRef)
		if r.Pareto {
			pareto = "**yes**"
		}
		if r.WithinNoise {
			noise = "yes"
		}
		if r.ReferenceFloor {
			pareto, noise, speed = "(noise floor)", "", "–"
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s | %.2f | %.2f ± %.2f | %.3f | %s | %.2f | %s | %s |\n",
			r.Config, r.ImagesPerSec, speed, r.FID, r.ISMean, r.ISStd, r.ClassAccuracy, alpha, r.TwoSampleFID, pareto, noise)
	}
	fmt.Fprintf(&b, "\nPareto: no other configuration is at least as fast with an FID at most %.2f (the noise floor) worse.\n", noiseOf(rows, s))
	if best := recommended(rows[:len(rows)-1]); best != nil {
		fmt.Fprintf(&b, "\nFastest Pareto point with FID within the reference's noise: `%s` (%.2f images/s, %.2fx the reference, FID %.2f)\n",
			best.Config, best.ImagesPerSec, best.SpeedupVsRef, best.FID)
	}
	return b.String()
}

// plotFrontier draws FID against images/s (log x), every configuration a point, the Pareto
// frontier a line.
func plotFrontier(path string, s FrontierSettings, rows []frontierRow) error {
	// a point far above the reference (a draft alone) would squeeze the rest into a line: it
	// stays in the table and is named in the title instead
	limit := math.Inf(1)
	if ref := referenceRow(rows, s); ref != nil {
		limit = 1.5 * ref.FID
	}
	pts := make([]chartPoint, len(rows))
	for i, r := range rows {
		pts[i] = chartPoint{r.ImagesPerSec, r.FID, r.Config, r.Pareto}
	}
	series, off := frontierSeries(pts, limit, "Pareto frontier (FID within noise)", "%s FID %.1f")
	title := fmt.Sprintf("speed vs quality: N = %d per configuration, seed %d, cfg %g\nPareto: no other point as fast with FID at most %.2f (the noise floor) worse",
		s.N, s.Seed, s.CFG, noiseOf(rows, s))
	if len(off) > 0 {
		title += "; off the chart: " + strings.Join(off, ", ")
	}
	return render.ChartLogX(path, title, "images/s (log)", "FID (lower is better)", series)
}

// chartPoint is one configuration on a frontier chart.
type chartPoint struct {
	speed, fid float64
	config     string
	pareto     bool
}

// frontierSeries is a frontier chart's data: every point at most limit as a labelled scatter,
// the Pareto points as a line by speed, and the points above limit named for the title (as
// offFormat prints a config and its value).
func frontierSeries(pts []chartPoint, limit float64, lineName, offFormat string) ([]render.Series, []string) {
	points := render.Series{Name: "configurations", Points: true}
	var front []chartPoint
	var off []string
	for _, p := range pts {
		if p.fid > limit {
			off = append(off, fmt.Sprintf(offFormat, shortConfig(p.config), p.fid))
			continue
		}
		points.X, points.Y = append(points.X, p.speed), append(points.Y, p.fid)
		points.Labels = append(points.Labels, shortConfig(p.config))
		if p.pareto {
			front = append(front, p)
		}
	}
	sort.Slice(front, func(i, j int) bool { return front[i].speed < front[j].speed })
	line := render.Series{Name: lineName}
	for _, p := range front {
		line.X, line.Y = append(line.X, p.speed), append(line.Y, p.fid)
	}
	return []render.Series{points, line}, off
}

// shortConfig is a configuration's label on the plot: target:num_iter=7:anneal=10 becomes
// "it7 anneal10", spec:verify=group:acceptance=exact:gamma=4 "spec group exact g4".
func shortConfig(c string) string {
	r := strings.NewReplacer("target:", "", "num_iter=", "it", "sampler=", "", "eta=", "eta", "verify=", "", "acceptance=", "",
		"gamma=", "g", "draft=", "draft ", "rejection=", "rej ", "tolerance=", "tol ", "steps=", "s", "=", "", ":", " ")
	return r.Replace(c)
}

// frontierRun is a finished frontier run as its frontier.json holds it.
type frontierRun struct {
	dir       string
	settings  FrontierSettings
	rows      []frontierRow
	evaluator string
}

func readFrontierRun(dir string) (frontierRun, error) {
	data, err := os.ReadFile(filepath.Join(dir, "frontier.json"))
	if err != nil {
		return frontierRun{}, fmt.Errorf("%s: %w (the folder of a finished frontier run)", dir, err)
	}
	var rep struct {
		Settings  FrontierSettings `json:"settings"`
		Results   []frontierRow    `json:"results"`
		Evaluator string           `json:"evaluator"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return frontierRun{}, fmt.Errorf("%s: frontier.json: %w", dir, err)
	}
	if len(rep.Results) < 2 || !rep.Results[len(rep.Results)-1].ReferenceFloor {
		return frontierRun{}, fmt.Errorf("%s: frontier.json must end with the reference's second sample (reference_second_sample true), as frontier writes it", dir)
	}
	return frontierRun{dir, rep.Settings, rep.Results, rep.Evaluator}, nil
}

// Replot writes a finished run's table and plot again from its frontier.json, with
// this version's rules and pictures, without the run's images: the way docs/results/ is
// redrawn, and a run is re-read after marspec changes how it marks or draws the frontier.
func Replot(dir string, w io.Writer) error {
	run, err := readFrontierRun(dir)
	if err != nil {
		return fmt.Errorf("--replot %w", err)
	}
	rows := run.rows
	markFrontier(rows[:len(rows)-1], run.settings)
	return writeFrontierReport(dir, run.settings, rows, run.evaluator, w)
}

// writeFrontierReport writes frontier.json, frontier.png and frontier.md of rows (the last
// one the reference's second sample) and prints the table.
func writeFrontierReport(dir string, s FrontierSettings, rows []frontierRow, evaluator string, w io.Writer) error {
	data, _ := json.MarshalIndent(map[string]any{"settings": s, "results": rows, "evaluator": evaluator}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "frontier.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := plotFrontier(filepath.Join(dir, "frontier.png"), s, rows[:len(rows)-1]); err != nil {
		return err
	}
	md := frontierTable(s, rows)
	if err := os.WriteFile(filepath.Join(dir, "frontier.md"), []byte(md), 0o644); err != nil {
		return err
	}
	_, err := io.WriteString(w, md)
	return err
}
