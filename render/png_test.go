package render

import (
	"bytes"
	"image"
	"image/png"
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
