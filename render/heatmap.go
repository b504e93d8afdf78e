package render

import (
	"image"
	"image/color"
	"math"

	"github.com/disintegration/imaging"
)

// Heatmap draws a grid of values in [0, 1] (NaN = no data, drawn grey) from dark blue (0) to
// yellow (1), each cell `scale` pixels wide: the paper's Fig. 11 acceptance map.
func Heatmap(values []float64, rows, cols, scale int) image.Image {
	small := image.NewNRGBA(image.Rect(0, 0, cols, rows))
	for i, v := range values[:rows*cols] {
		c := color.NRGBA{128, 128, 128, 255}
		if !math.IsNaN(v) {
			v = math.Max(0, math.Min(1, v))
			c = color.NRGBA{uint8(30 + 225*v), uint8(30 + 200*v), uint8(120 * (1 - v)), 255}
		}
		small.SetNRGBA(i%cols, i/cols, c)
	}
	return imaging.Resize(small, cols*scale, rows*scale, imaging.NearestNeighbor)
}
