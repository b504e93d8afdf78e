package render

import (
	"fmt"
	"image/color"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
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
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xLabel, yLabel
	p.Add(plotter.NewGrid())
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
		if len(s.Labels) > 0 {
			if len(s.Labels) != len(pts) {
				return fmt.Errorf("chart %s: series %s has %d labels for %d points", title, s.Name, len(s.Labels), len(pts))
			}
			// neighbours along x take turns above and below their point, so that close points'
			// labels do not print over each other
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
		} else {
			p.Legend.Add(s.Name, sc)
		}
		if !s.Points {
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			line.Color = c
			p.Add(line)
		}
	}
	p.Legend.Top = true
	for _, s := range series {
		if len(s.Labels) > 0 {
			// labelled points crowd the fast (right) end of a speed axis; slow and bad is rare
			p.Legend.Left = true
		}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
