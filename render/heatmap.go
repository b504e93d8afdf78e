package render

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"github.com/disintegration/imaging"
)

// noData is the colour of a position where no draft was verified.
var noData = color.NRGBA{128, 128, 128, 255}

// heatColour runs from dark blue (0) to yellow (1), the gallery's scale too (web/charts.js).
func heatColour(v float64) color.NRGBA {
	if math.IsNaN(v) {
		return noData
	}
	v = math.Max(0, math.Min(1, v))
	return color.NRGBA{uint8(30 + 225*v), uint8(30 + 200*v), uint8(120 * (1 - v)), 255}
}

// Heatmap draws a grid of values in [0, 1] (NaN = no data, drawn grey) from dark blue (0) to
// yellow (1), each cell `scale` pixels wide: the paper's Fig. 11 acceptance map, bare.
func Heatmap(values []float64, rows, cols, scale int) image.Image {
	small := image.NewNRGBA(image.Rect(0, 0, cols, rows))
	for i, v := range values[:rows*cols] {
		small.SetNRGBA(i%cols, i/cols, heatColour(v))
	}
	return imaging.Resize(small, cols*scale, rows*scale, imaging.NearestNeighbor)
}

const (
	figurePad       = 12
	figureTitleSize = 15.0
	figureTextSize  = 13.0
	barWidth        = 18
)

var (
	figureInk = color.NRGBA{30, 30, 30, 255}
	figureBg  = color.NRGBA{255, 255, 255, 255}
)

// HeatmapFigure is Heatmap as a picture that explains itself: the title lines above (what was
// measured, for which classes, with which settings; wrapped to the width), a colour bar from
// 0 to 1 labelled "acceptance rate" to the right, a grey swatch when some positions had no
// verified draft, and the grid's orientation below.
func HeatmapFigure(values []float64, rows, cols int, title []string) image.Image {
	scale := max(6, min(36, 320/max(rows, cols)))
	mapW, mapH := cols*scale, rows*scale
	barH := max(mapH, 160)
	ticks := []float64{0, 0.25, 0.5, 0.75, 1}
	tickW := textWidth("0.75", figureTextSize)
	caption := "acceptance rate"
	rightW := max(barWidth+6+tickW, textWidth(caption, figureTextSize))
	width := max(figurePad+mapW+24+rightW+figurePad, 460)
	var lines []string
	for _, t := range title {
		lines = append(lines, wrapWords(t, figureTitleSize, width-2*figurePad)...)
	}
	titleH := len(lines) * lineHeight(figureTitleSize)
	// the bar's caption sits above it, clear of the top tick's label
	top := figurePad + titleH + 10 + 2*lineHeight(figureTextSize)
	footer := fmt.Sprintf("token positions: %d rows x %d columns, as in the image", rows, cols)
	missing := 0
	for _, v := range values[:rows*cols] {
		if math.IsNaN(v) {
			missing++
		}
	}
	footLines := 1
	if missing > 0 {
		footLines = 2
	}
	height := top + barH + 8 + footLines*lineHeight(figureTextSize) + figurePad
	canvas := imaging.New(width, height, figureBg)
	for i, l := range lines {
		drawText(canvas, figurePad, figurePad+i*lineHeight(figureTitleSize), l, figureTitleSize, figureInk)
	}
	canvas = imaging.Paste(canvas, Heatmap(values, rows, cols, scale), image.Pt(figurePad, top))

	barX := figurePad + mapW + 24
	drawText(canvas, barX, top-3*lineHeight(figureTextSize)/2-4, caption, figureTextSize, figureInk)
	for y := range barH {
		c := heatColour(1 - float64(y)/float64(barH-1))
		for x := range barWidth {
			canvas.SetNRGBA(barX+x, top+y, c)
		}
	}
	for _, t := range ticks {
		y := top + int(math.Round((1-t)*float64(barH-1)))
		for x := barWidth; x < barWidth+4; x++ {
			canvas.SetNRGBA(barX+x, y, figureInk)
		}
		label := fmt.Sprintf("%g", t)
		drawText(canvas, barX+barWidth+6, y-lineHeight(figureTextSize)/2, label, figureTextSize, figureInk)
	}

	y := top + barH + 8
	drawText(canvas, figurePad, y, footer, figureTextSize, figureInk)
	if missing > 0 {
		y += lineHeight(figureTextSize)
		sw := lineHeight(figureTextSize) - 4
		for dy := range sw {
			for dx := range sw {
				canvas.SetNRGBA(figurePad+dx, y+2+dy, noData)
			}
		}
		drawText(canvas, figurePad+sw+6, y, fmt.Sprintf("grey: no draft verified there (%d of %d positions)", missing, rows*cols),
			figureTextSize, figureInk)
	}
	return canvas
}
