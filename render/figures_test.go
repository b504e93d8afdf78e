package render

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func square(v uint8) image.Image {
	img := image.NewGray(image.Rect(0, 0, 4, 4))
	for i := range img.Pix {
		img.Pix[i] = v
	}
	return img
}

// inked counts pixels in r that are neither the background nor pure white/black cells:
// what a label drawn there leaves.
func inked(img image.Image, r image.Rectangle, background color.Color) int {
	br, bg, bb, _ := background.RGBA()
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if cr != br || cg != bg || cb != bb {
				n++
			}
		}
	}
	return n
}

func TestLabelledGridWritesEachRowsName(t *testing.T) {
	cells := []image.Image{square(255), square(255), square(255), square(255)}
	plain := Grid(cells, 2, 4)
	named := LabelledGrid(cells, 2, 4, []string{"0 T-shirt/top", ""})
	margin := named.Bounds().Dx() - plain.Bounds().Dx()
	if margin < textWidth("0 T-shirt/top", gridLabelSize) {
		t.Fatalf("label column %d px, narrower than the label", margin)
	}
	rowH := 4*4 + gridGap
	if inked(named, image.Rect(0, 0, margin, rowH), gridBackground) == 0 {
		t.Fatal("row 0 carries no label")
	}
	if n := inked(named, image.Rect(0, rowH+gridGap, margin, 2*rowH), gridBackground); n != 0 {
		t.Fatalf("row 1 was given no label but has %d inked pixels", n)
	}
	if !reflect.DeepEqual(LabelledGrid(cells, 2, 4, nil).Bounds(), plain.Bounds()) {
		t.Fatal("no labels must give the plain grid")
	}
}

func TestLabelledGridLeavesNilCellsEmpty(t *testing.T) {
	g := LabelledGrid([]image.Image{nil, square(255)}, 2, 1, nil)
	if c := color.NRGBAModel.Convert(g.At(gridGap+1, gridGap+1)); c != gridBackground {
		t.Fatalf("empty cell drawn as %v", c)
	}
	if c := color.GrayModel.Convert(g.At(2*gridGap+4+1, gridGap+1)).(color.Gray); c.Y != 255 {
		t.Fatalf("second cell not drawn: %v", c)
	}
}

func TestHeatmapFigureHasItsScaleAndTitle(t *testing.T) {
	values := []float64{0, 0.5, 1, math.NaN()}
	fig := HeatmapFigure(values, 2, 2, []string{"Acceptance rate", "class 7 Sneaker (8)"})
	b := fig.Bounds()
	// the colour bar runs from the 1 colour at its top to the 0 colour at its bottom: find
	// both in one column right of the map
	found := map[color.NRGBA]bool{}
	for x := b.Min.X; x < b.Max.X; x++ {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			c := color.NRGBAModel.Convert(fig.At(x, y)).(color.NRGBA)
			found[c] = true
		}
	}
	for _, want := range []color.NRGBA{heatColour(0), heatColour(1), heatColour(0.5), noData} {
		if !found[want] {
			t.Fatalf("figure lacks colour %v", want)
		}
	}
	if inked(fig, image.Rect(0, 0, b.Dx(), figurePad+lineHeight(figureTitleSize)), figureBg) == 0 {
		t.Fatal("no title")
	}
	if b.Dx() < 460 {
		t.Fatalf("figure %d px wide, narrower than its text", b.Dx())
	}
}

func TestReadableLogTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (readableLogTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	if got, want := labels(3, 80), []string{"5", "10", "20", "50"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("3 to 80: %v, want %v", got, want)
	}
	if got, want := labels(12, 45), []string{"20", "30", "40"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("12 to 45 (less than a decade): %v, want %v", got, want)
	}
	if got := labels(0.3, 200); len(got) < 6 {
		t.Fatalf("0.3 to 200: %v", got)
	}
}

func TestChartPutsTheLegendBesideTheData(t *testing.T) {
	dir := t.TempDir()
	series := func(name string) []Series {
		return []Series{{Name: name, X: []float64{1, 2, 3}, Y: []float64{3, 1, 2}}}
	}
	short, long := filepath.Join(dir, "short.png"), filepath.Join(dir, "long.png")
	if err := Chart(short, "t", "x", "y", series("a")); err != nil {
		t.Fatal(err)
	}
	if err := Chart(long, "t", "x", "y", series("a much longer series name than the first")); err != nil {
		t.Fatal(err)
	}
	width := func(path string) int {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg, err := png.DecodeConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Width
	}
	// the data area keeps its size and the legend's column grows with its text
	if ws, wl := width(short), width(long); wl <= ws || ws <= 8*96 {
		t.Fatalf("widths %d (short name) and %d (long name): the legend is not beside the data", ws, wl)
	}
}

func TestRoundTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (roundTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	if got, want := labels(0.02, 0.23), []string{"0.05", "0.1", "0.15", "0.2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("0.02 to 0.23: %v, want %v", got, want)
	}
	if got, want := labels(3, 48), []string{"10", "20", "30", "40"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("3 to 48: %v, want %v", got, want)
	}
	if got, want := labels(0, 1), []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("0 to 1: %v, want %v", got, want)
	}
}
