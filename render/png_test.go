package render

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"io"
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

// smallImages are gray and colour images of the embedded and MAR's sizes, with varied pixels.
func smallImages(t testing.TB) []image.Image {
	var imgs []image.Image
	for i, size := range [][3]int{{28, 28, 1}, {28, 28, 3}, {64, 48, 1}, {256, 256, 3}} {
		h, w, c := size[0], size[1], size[2]
		px := make([]uint8, h*w*c)
		for j := range px {
			px[j] = uint8(j*(7+i) + j/w)
		}
		img, err := FromPixels(px, h, w, c)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	return imgs
}

// The reused encoder writes the bytes png.Encode writes, one image after another of different
// sizes and kinds, from goroutines side by side (with -race, the pool's sharing).
func TestEncodePNGMatchesStandardEncoder(t *testing.T) {
	imgs := smallImages(t)
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func() {
			for round := 0; round < 3; round++ {
				for i, img := range imgs {
					var want bytes.Buffer
					if err := png.Encode(&want, img); err != nil {
						done <- err
						return
					}
					got, err := EncodePNG(img, "")
					if err != nil {
						done <- err
						return
					}
					if !bytes.Equal(got, want.Bytes()) {
						done <- fmt.Errorf("image %d, round %d: %d bytes, png.Encode wrote %d", i, round, len(got), want.Len())
						return
					}
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// BenchmarkEncodePNG times a 28x28 image (the embedded packs') through EncodePNG and through
// png.Encode, which makes a fresh compressor per image.
func BenchmarkEncodePNG(b *testing.B) {
	img := smallImages(b)[0]
	b.Run("EncodePNG", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := EncodePNG(img, "model=target"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("png.Encode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := png.Encode(io.Discard, img); err != nil {
				b.Fatal(err)
			}
		}
	})
}
