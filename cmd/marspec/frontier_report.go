package main

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"marspec/render"
)

// markFrontier flags the Pareto-optimal rows (no other row is at least as fast and at least as
// good with one of the two strictly better), the rows whose FID is within the sampling noise of
// the reference's, and each row's speed relative to the reference. The noise scale is the
// two-sample FID between the reference and its own second sample: what two runs of one sampler
// differ by at this N.
func markFrontier(rows []frontierRow, s frontierSettings) {
	ref := referenceRow(rows, s)
	for i := range rows {
		a := &rows[i]
		a.Pareto = true
		for j, b := range rows {
			if i != j && b.FID <= a.FID && b.ImagesPerSec >= a.ImagesPerSec &&
				(b.FID < a.FID || b.ImagesPerSec > a.ImagesPerSec) {
				a.Pareto = false
				break
			}
		}
		if ref != nil {
			a.WithinNoise = a.FID <= ref.FID+ref.TwoSampleFID
			a.SpeedupVsRef = a.ImagesPerSec / ref.ImagesPerSec
		}
	}
}

func referenceRow(rows []frontierRow, s frontierSettings) *frontierRow {
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

func frontierTable(s frontierSettings, rows []frontierRow) string {
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
	if best := recommended(rows[:len(rows)-1]); best != nil {
		fmt.Fprintf(&b, "\nFastest Pareto point with FID within the reference's noise: `%s` (%.2f images/s, %.2fx the reference, FID %.2f)\n",
			best.Config, best.ImagesPerSec, best.SpeedupVsRef, best.FID)
	}
	return b.String()
}

// plotFrontier draws FID against images/s (log x), every configuration a point, the Pareto
// frontier a line.
func plotFrontier(path string, s frontierSettings, rows []frontierRow) error {
	points := render.Series{Name: "configurations", Points: true}
	var front []frontierRow
	// a point far above the reference (a draft alone) would squeeze the rest into a line: it
	// stays in the table and is named in the title instead
	var off []string
	limit := math.Inf(1)
	if ref := referenceRow(rows, s); ref != nil {
		limit = 1.5 * ref.FID
	}
	for _, r := range rows {
		if r.FID > limit {
			off = append(off, fmt.Sprintf("%s FID %.1f", shortConfig(r.Config), r.FID))
			continue
		}
		points.X, points.Y = append(points.X, r.ImagesPerSec), append(points.Y, r.FID)
		points.Labels = append(points.Labels, shortConfig(r.Config))
		if r.Pareto {
			front = append(front, r)
		}
	}
	series := []render.Series{points}
	sort.Slice(front, func(i, j int) bool { return front[i].ImagesPerSec < front[j].ImagesPerSec })
	line := render.Series{Name: " Pareto frontier"}
	for _, r := range front {
		line.X, line.Y = append(line.X, r.ImagesPerSec), append(line.Y, r.FID)
	}
	series = append(series, line)
	title := fmt.Sprintf("speed vs quality, N=%d, cfg %g", s.N, s.CFG)
	if len(off) > 0 {
		title += " (off the chart: " + strings.Join(off, ", ") + ")"
	}
	return render.ChartLogX(path, title, "images/s (log)", "FID (lower is better)", series)
}

// shortConfig is a configuration's label on the plot: target:num_iter=7:anneal=10 becomes
// "it7 anneal10", spec:verify=group:acceptance=exact:gamma=4 "spec group exact g4".
func shortConfig(c string) string {
	r := strings.NewReplacer("target:", "", "num_iter=", "it", "verify=", "", "acceptance=", "",
		"gamma=", "g", "draft=", "draft ", "rejection=", "rej ", "tolerance=", "tol ", "steps=", "s", "=", "", ":", " ")
	return r.Replace(c)
}
