package render

import (
	"image"
	"image/color"
	"slices"

	"github.com/disintegration/imaging"
)

// gridBackground is the gap colour between cells; labels are drawn on it in labelColour.
var (
	gridBackground = color.NRGBA{40, 40, 40, 255}
	labelColour    = color.NRGBA{235, 235, 235, 255}
)

const (
	gridGap       = 2
	gridLabelSize = 15.0
)

// Grid lays images out in rows of `cols`, each cell upscaled by `scale` with nearest-neighbour
// (tiny images stay crisp) and separated by a 2-pixel gap.
func Grid(images []image.Image, cols, scale int) image.Image {
	return LabelledGrid(images, cols, scale, nil)
}

// LabelledGrid is Grid with rowLabels[r] written left of row r ("" leaves a row unnamed; nil
// or all empty gives no label column at all), so a grid of classes names them itself. A nil
// image leaves its cell empty (a short row); cells take the size of the first image.
func LabelledGrid(images []image.Image, cols, scale int, rowLabels []string) image.Image {
	first := slices.IndexFunc(images, func(img image.Image) bool { return img != nil })
	if first < 0 {
		return image.NewGray(image.Rect(0, 0, 1, 1))
	}
	b := images[first].Bounds()
	cw, ch := b.Dx()*scale, b.Dy()*scale
	rows := (len(images) + cols - 1) / cols
	margin := 0
	for _, l := range rowLabels {
		margin = max(margin, textWidth(l, gridLabelSize))
	}
	if margin > 0 {
		margin += 2 * 6 // padding either side of the longest label
	}
	canvas := imaging.New(margin+cols*(cw+gridGap)+gridGap, rows*(ch+gridGap)+gridGap, gridBackground)
	for i, img := range images {
		if img == nil {
			continue
		}
		cell := imaging.Resize(img, cw, ch, imaging.NearestNeighbor)
		x, y := margin+gridGap+(i%cols)*(cw+gridGap), gridGap+(i/cols)*(ch+gridGap)
		canvas = imaging.Paste(canvas, cell, image.Pt(x, y))
	}
	for r, l := range rowLabels[:min(len(rowLabels), rows)] {
		if l == "" {
			continue
		}
		y := gridGap + r*(ch+gridGap) + (ch-lineHeight(gridLabelSize))/2
		drawText(canvas, margin-6-textWidth(l, gridLabelSize), y, l, gridLabelSize, labelColour)
	}
	return canvas
}
