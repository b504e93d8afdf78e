package render

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Series is one named set of points of a chart.
type Series struct {
	Name   string
	X, Y   []float64
	Points bool // draw markers only (a scatter), not a line
	// Labels, when set, name each point on the chart itself (one per point) instead of a
	// legend entry: many single points with a legend would repeat the palette's colours.
	Labels []string
}

// Chart writes a PNG chart of the series with the given title and axis labels.
func Chart(path, title, xLabel, yLabel string, series []Series) error {
	return chart(path, title, xLabel, yLabel, series, false)
}

// ChartLogX is Chart with a logarithmic x axis (for speeds that span orders of magnitude);
// every x must be positive.
func ChartLogX(path, title, xLabel, yLabel string, series []Series) error {
	for _, s := range series {
		for _, x := range s.X {
			if x <= 0 {
				return fmt.Errorf("chart %s: series %s has x = %g, not allowed on a log axis", title, s.Name, x)
			}
		}
	}
	return chart(path, title, xLabel, yLabel, series, true)
}

func chart(path, title, xLabel, yLabel string, series []Series, logX bool) error {
	p := plot.New()
	p.X.Tick.Marker, p.Y.Tick.Marker = roundTicks{}, roundTicks{}
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = readableLogTicks{}
	}
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xLabel, yLabel
	p.Add(plotter.NewGrid())
	// the legend goes beside the data, never on it: it is drawn in a column right of the axes
	legend := plot.NewLegend()
	legend.Left = true
	legend.Top = true
	palette := []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255},
		{214, 39, 40, 255}, {148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}}
	sort.SliceStable(series, func(i, j int) bool { return series[i].Name < series[j].Name })
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("chart %s: series %s has %d x and %d y values", title, s.Name, len(s.X), len(s.Y))
		}
		pts := make(plotter.XYs, len(s.X))
		for k := range s.X {
			pts[k].X, pts[k].Y = s.X[k], s.Y[k]
		}
		c := palette[i%len(palette)]
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.Color = c
		p.Add(sc)
		thumbs := []plot.Thumbnailer{sc}
		if !s.Points {
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			line.Color = c
			p.Add(line)
			thumbs = append(thumbs, line)
		}
		if len(s.Labels) > 0 {
			if err := labelPoints(p, s, pts); err != nil {
				return fmt.Errorf("chart %s: %w", title, err)
			}
		}
		legend.Add(s.Name, thumbs...)
	}
	padAxes(p, logX)
	// the data area keeps its size; a legend widens the picture instead of squeezing the axes
	const plotW, height = 8 * vg.Inch, 5 * vg.Inch
	legendW := vg.Length(0)
	if r := legend.Rectangle(draw.New(vgimg.New(plotW, height))); r.Max.X > r.Min.X {
		legendW = r.Max.X - r.Min.X + vg.Points(18)
	}
	img := vgimg.New(plotW+legendW, height)
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -legendW, 0, 0))
	if legendW > 0 {
		// level with the top of the data area, below the title
		top := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding + vg.Points(6)
		legend.Draw(draw.Crop(dc, plotW+vg.Points(6), 0, 0, -top))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// padAxes leaves a margin around the data so that points at the ends are drawn whole (gonum
// puts the extreme points on the axes' ends).
func padAxes(p *plot.Plot, logX bool) {
	if logX {
		p.X.Min, p.X.Max = p.X.Min/1.08, p.X.Max*1.08
	} else if span := p.X.Max - p.X.Min; span > 0 {
		p.X.Min, p.X.Max = p.X.Min-0.04*span, p.X.Max+0.04*span
	}
	if span := p.Y.Max - p.Y.Min; span > 0 {
		p.Y.Min, p.Y.Max = p.Y.Min-0.05*span, p.Y.Max+0.05*span
	}
}

// labelPoints names each point of s on the chart itself: neighbours along x take turns above
// and below their point, so that close points' labels do not print over each other.
func labelPoints(p *plot.Plot, s Series, pts plotter.XYs) error {
	if len(s.Labels) != len(pts) {
		return fmt.Errorf("series %s has %d labels for %d points", s.Name, len(s.Labels), len(pts))
	}
	order := make([]int, len(pts))
	for k := range order {
		order[k] = k
	}
	sort.Slice(order, func(a, b int) bool { return pts[order[a]].X < pts[order[b]].X })
	var sides [2]plotter.XYLabels
	for rank, k := range order {
		sides[rank%2].XYs = append(sides[rank%2].XYs, pts[k])
		sides[rank%2].Labels = append(sides[rank%2].Labels, s.Labels[k])
	}
	for side, xy := range sides {
		if len(xy.XYs) == 0 {
			continue
		}
		labels, err := plotter.NewLabels(xy)
		if err != nil {
			return err
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Font.Size = vg.Points(7)
		}
		labels.Offset = vg.Point{X: vg.Points(3), Y: vg.Points(3)}
		if side == 1 {
			labels.Offset.Y = vg.Points(-9)
		}
		p.Add(labels)
	}
	return nil
}

// roundTicks labels a linear axis at round values, 1, 2 or 5 times a power of ten apart, five
// to ten of them (gonum's default can label 0.025, 0.125, 0.225).
type roundTicks struct{}

func (roundTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 4, 64)}}
	}
	raw := (hi - lo) / 5
	step := math.Pow10(int(math.Floor(math.Log10(raw))))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*step >= raw {
			step *= m
			break
		}
	}
	var ticks []plot.Tick
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		v := k * step
		// minor ticks halfway, unlabelled
		if half := v - step/2; half >= lo {
			ticks = append(ticks, plot.Tick{Value: half})
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(roundTo(v, step), 'g', -1, 64)})
	}
	return ticks
}

// roundTo removes the float noise of k*step (0.30000000000000004) at the step's precision.
func roundTo(v, step float64) float64 {
	digits := max(0, -int(math.Floor(math.Log10(step)))+1)
	scale := math.Pow10(digits)
	return math.Round(v*scale) / scale
}

// readableLogTicks labels a log axis at 1, 2 and 5 times each power of ten (every integer
// multiple when the axis spans less than a decade), so a speed axis from 3 to 80 reads
// 5, 10, 20, 50 instead of a lone 10.
type readableLogTicks struct{}

func (readableLogTicks) Ticks(lo, hi float64) []plot.Tick {
	labelled := map[int]bool{1: true, 2: true, 5: true}
	if hi/lo < 10 {
		labelled = map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true}
	}
	var ticks []plot.Tick
	for decade := math.Pow10(int(math.Floor(math.Log10(lo)))); decade <= hi; decade *= 10 {
		for m := 1; m < 10; m++ {
			v := float64(m) * decade
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if labelled[m] {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
