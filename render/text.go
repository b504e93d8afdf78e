package render

import (
	"image"
	"image/color"
	"image/draw"
	"strings"
	"sync"

	"codeberg.org/go-fonts/liberation/liberationsansregular"
	"golang.org/x/image/font"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// Pictures carry their own words (class names, a title, a colour scale) so that a grid or a
// heatmap read on its own, away from the command that made it. The font is the one gonum's
// charts already embed, so labels and charts look alike and nothing new is vendored.

var (
	sansOnce sync.Once
	sansFont *opentype.Font
	sansErr  error
	facesMu  sync.Mutex
	faces    = map[float64]font.Face{}
)

// face is Liberation Sans at size pixels (72 dpi: points are pixels).
func face(size float64) font.Face {
	sansOnce.Do(func() { sansFont, sansErr = opentype.Parse(liberationsansregular.TTF) })
	if sansErr != nil {
		panic("render: the embedded font does not parse: " + sansErr.Error())
	}
	facesMu.Lock()
	defer facesMu.Unlock()
	if f, ok := faces[size]; ok {
		return f
	}
	f, err := opentype.NewFace(sansFont, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		panic("render: font face: " + err.Error())
	}
	faces[size] = f
	return f
}

// textWidth is how many pixels s takes at size.
func textWidth(s string, size float64) int {
	return font.MeasureString(face(size), s).Ceil()
}

// drawText writes s with its top-left corner at (x, y).
func drawText(dst draw.Image, x, y int, s string, size float64, c color.Color) {
	f := face(size)
	d := font.Drawer{Dst: dst, Src: image.NewUniform(c), Face: f,
		Dot: fixed.Point26_6{X: fixed.I(x), Y: fixed.I(y) + f.Metrics().Ascent}}
	d.DrawString(s)
}

// lineHeight is the distance between two lines of text at size.
func lineHeight(size float64) int {
	return face(size).Metrics().Height.Ceil()
}

// wrapWords breaks s into lines of at most width pixels at size, at spaces (a word longer
// than the width gets a line of its own).
func wrapWords(s string, size float64, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		next := w
		if line != "" {
			next = line + " " + w
		}
		if line != "" && textWidth(next, size) > width {
			lines = append(lines, line)
			next = w
		}
		line = next
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
