package render

import (
	"image"
	"image/color"

	"github.com/disintegration/imaging"
)

// Grid lays images out in rows of `cols`, each cell upscaled by `scale` with nearest-neighbour
// (tiny images stay crisp) and separated by a 2-pixel gap.
func Grid(images []image.Image, cols, scale int) image.Image {
	if len(images) == 0 {
		return image.NewGray(image.Rect(0, 0, 1, 1))
	}
	b := images[0].Bounds()
	cw, ch := b.Dx()*scale, b.Dy()*scale
	const gap = 2
	rows := (len(images) + cols - 1) / cols
	canvas := imaging.New(cols*(cw+gap)+gap, rows*(ch+gap)+gap, color.NRGBA{40, 40, 40, 255})
	for i, img := range images {
		cell := imaging.Resize(img, cw, ch, imaging.NearestNeighbor)
		x, y := gap+(i%cols)*(cw+gap), gap+(i/cols)*(ch+gap)
		canvas = imaging.Paste(canvas, cell, image.Pt(x, y))
	}
	return canvas
}
