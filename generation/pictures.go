package generation

import (
	"fmt"
	"image"
	"strconv"
	"strings"

	"marspec/arsampler"
	"marspec/render"
)

// The run's pictures read on their own: the grid names the class of each row, the heatmap
// says what it measures, over which images and with which settings.

// WriteGrid writes all images as one picture, a row per class when every class has the same
// count (at most 16 columns), each row named by its class, with the plan's provenance.
func (p Plan) WriteGrid(path string, imgs []Image) error {
	cells := make([]image.Image, 0, len(imgs))
	classes := make([]int, len(imgs))
	names := make([]string, len(imgs))
	for i, img := range imgs {
		pic, err := p.Picture(img)
		if err != nil {
			return err
		}
		cells = append(cells, pic)
		classes[i], names[i] = img.Class, p.ClassNames[img.Index]
	}
	return render.WritePNG(path, LayoutGrid(cells, classes, names), p.Params())
}

// LayoutGrid lays pictures out a row per class when they come class by class (n of each),
// at most 16 columns, each cell upscaled by gridScale; a row whose pictures share one class is
// labelled "class name" (names[i] is picture i's class name; nil leaves rows unnamed).
func LayoutGrid(pics []image.Image, classes []int, names []string) image.Image {
	cols := len(pics)
	if n := leadingRun(classes); n > 0 && n < len(classes) {
		cols = n
	}
	cols = min(cols, 16)
	return render.LabelledGrid(pics, cols, gridScale(pics), rowLabels(classes, names, cols))
}

// gridCell is the side, in pixels, a grid cell is scaled up towards: Fashion-MNIST's 28x28
// pictures 4 times, so they can be seen; MAR's 256x256 ones are left at their size (4 times
// would make a 16-column grid 16,000 pixels wide).
const gridCell = 112

// gridScale is the whole factor that brings the first picture's longer side closest to
// gridCell from below, at least 1.
func gridScale(pics []image.Image) int {
	for _, p := range pics {
		if p != nil {
			b := p.Bounds()
			return max(1, gridCell/max(b.Dx(), b.Dy(), 1))
		}
	}
	return 1
}

// rowLabels names each row of cols pictures by its class, or "" when a row mixes classes.
func rowLabels(classes []int, names []string, cols int) []string {
	if len(names) != len(classes) || cols < 1 {
		return nil
	}
	var labels []string
	for start := 0; start < len(classes); start += cols {
		end := min(start+cols, len(classes))
		label := classLabel(classes[start], names[start])
		for i := start; i < end; i++ {
			if classes[i] != classes[start] {
				label = ""
			}
		}
		labels = append(labels, label)
	}
	return labels
}

func classLabel(class int, name string) string {
	if name == "" {
		return strconv.Itoa(class)
	}
	return fmt.Sprintf("%d %s", class, name)
}

// leadingRun is how many consecutive entries equal the first.
func leadingRun(classes []int) int {
	n := 0
	for n < len(classes) && classes[n] == classes[0] {
		n++
	}
	return n
}

// WriteHeatmap draws the per-position acceptance rate of a speculative run (paper Fig. 11).
func (p Plan) WriteHeatmap(path string, sum *arsampler.Summary) error {
	if sum == nil {
		return fieldErr("heatmap", strconv.Quote(path), "mode spec", "only speculative runs verify drafts")
	}
	pic := HeatmapPicture(AcceptanceRates(sum), p.GridH, p.GridW, p.Classes, p.ClassNames, p.Params())
	return render.WritePNG(path, pic, p.Params())
}

// HeatmapPicture is the acceptance map of images of the given classes (one entry per image,
// names alike) made with params, titled with all three and a colour scale beside it.
func HeatmapPicture(rates []float64, gridH, gridW int, classes []int, names []string, params string) image.Image {
	title := []string{
		fmt.Sprintf("Acceptance rate of drafted tokens per position, over %d %s", len(classes), plural(len(classes), "image", "images")),
		classSummary(classes, names),
		params,
	}
	return render.HeatmapFigure(rates, gridH, gridW, title)
}

// classSummary names the distinct classes in order of first appearance, with how many images
// each had: "class 7 Sneaker (8)", or "10 classes" when naming them all would not fit a line.
func classSummary(classes []int, names []string) string {
	count := map[int]int{}
	var order []int
	name := map[int]string{}
	for i, c := range classes {
		if count[c] == 0 {
			order = append(order, c)
			if i < len(names) {
				name[c] = names[i]
			}
		}
		count[c]++
	}
	if len(order) > 4 {
		return fmt.Sprintf("%d classes", len(order))
	}
	parts := make([]string, len(order))
	for i, c := range order {
		parts[i] = fmt.Sprintf("%s (%d)", classLabel(c, name[c]), count[c])
	}
	word := "class "
	if len(order) > 1 {
		word = "classes "
	}
	return word + strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
