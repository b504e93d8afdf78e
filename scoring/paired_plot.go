package scoring

import (
	"fmt"
	"math"
	"strings"

	"marspec/render"
)

// Plot draws the paired report: mean paired FID against the speed over the reference (log x),
// each configuration a labelled point, the Pareto rows a line and the noise floor a level
// line, so the recommended point reads off as the rightmost Pareto point below that line.
func (rep *PairedReport) Plot(path string) error {
	// a configuration far worse than the floor (a solver that fails) would squeeze the rest
	// into a line: it stays in the table and is named in the title instead
	limit := math.Max(10, 10*rep.Noise)
	var pts []chartPoint
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range rep.Rows {
		if p.MeanPaired == nil || p.SpeedRuns == 0 {
			continue
		}
		pts = append(pts, chartPoint{p.Speedup, *p.MeanPaired, p.Config, p.Pareto})
		if *p.MeanPaired <= limit {
			lo, hi = math.Min(lo, p.Speedup), math.Max(hi, p.Speedup)
		}
	}
	series, off := frontierSeries(pts, limit, "Pareto frontier", "%s %+.1f")
	if len(series[0].X) == 0 {
		return fmt.Errorf("plot %s: no configuration has both a speed and a mean paired FID", path)
	}
	floor := render.Series{Name: fmt.Sprintf("noise floor (+%.2f)", rep.Noise), X: []float64{lo, hi}, Y: []float64{rep.Noise, rep.Noise}}
	seeds := make([]string, len(rep.Seeds))
	for i, s := range rep.Seeds {
		seeds[i] = fmt.Sprint(s)
	}
	title := fmt.Sprintf("N = %d per configuration, cfg %g, seeds %s: FID minus %s's at the same seed, mean",
		rep.N, rep.CFG, strings.Join(seeds, " and "), shortConfig(rep.Reference))
	if rep.Best != "" {
		title += "\nfastest Pareto point within the floor: " + shortConfig(rep.Best)
	}
	if len(off) > 0 {
		title += "\noff the chart: " + strings.Join(off, ", ")
	}
	return render.ChartLogX(path, title, "speed over "+shortConfig(rep.Reference)+" (log)",
		"paired FID (lower is better)", append(series, floor))
}
