package render

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"testing"
)

func TestParametersSurviveEncoding(t *testing.T) {
	px := make([]uint8, 28*28)
	for i := range px {
		px[i] = uint8(i)
	}
	img, err := FromPixels(px, 28, 28, 1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := EncodePNG(img, "model=target seed=3")
	if err != nil {
		t.Fatal(err)
	}
	if got := ReadParameters(data); got != "model=target seed=3" {
		t.Fatalf("parameters: %q", got)
	}
	back, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("decoder rejects the PNG with a tEXt chunk: %v", err)
	}
	if r, _, _, _ := back.At(5, 1).RGBA(); uint8(r>>8) != px[28+5] {
		t.Fatalf("pixel changed")
	}
}

func TestGridSize(t *testing.T) {
	px := make([]uint8, 28*28)
	img, _ := FromPixels(px, 28, 28, 1)
	g := Grid([]image.Image{img, img, img}, 2, 3)
	if g.Bounds().Dx() != 2*(84+2)+2 || g.Bounds().Dy() != 2*(84+2)+2 {
		t.Fatalf("grid bounds %v", g.Bounds())
	}
}

func TestChartWritesPNG(t *testing.T) {
	path := t.TempDir() + "/c.png"
	err := Chart(path, "alpha per step", "AR step", "alpha", []Series{
		{Name: "a", X: []float64{1, 2, 3}, Y: []float64{0.1, 0.3, 0.2}},
		{Name: "b", X: []float64{1.5}, Y: []float64{0.5}, Points: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if _, err := png.Decode(bytes.NewReader(data)); err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if err := Chart(path, "x", "x", "y", []Series{{Name: "bad", X: []float64{1}}}); err == nil {
		t.Fatal("mismatched series accepted")
	}
}
