package generation

import (
	"image"
	"reflect"
	"testing"
)

func TestRowLabelsNameRowsOfOneClass(t *testing.T) {
	names := func(classes []int) []string {
		all := []string{"T-shirt/top", "Trouser", "Pullover"}
		out := make([]string, len(classes))
		for i, c := range classes {
			out[i] = all[c]
		}
		return out
	}
	for _, tc := range []struct {
		classes []int
		cols    int
		want    []string
	}{
		{[]int{0, 0, 1, 1, 2, 2}, 2, []string{"0 T-shirt/top", "1 Trouser", "2 Pullover"}},
		{[]int{1, 1, 1}, 3, []string{"1 Trouser"}},
		{[]int{0, 1, 2, 0}, 4, []string{""}},                                          // mixed classes: no single name
		{[]int{2, 2, 2, 2, 2}, 2, []string{"2 Pullover", "2 Pullover", "2 Pullover"}}, // wrapped
	} {
		if got := rowLabels(tc.classes, names(tc.classes), tc.cols); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("classes %v in rows of %d: %q, want %q", tc.classes, tc.cols, got, tc.want)
		}
	}
	if got := rowLabels([]int{0, 1}, nil, 2); got != nil {
		t.Errorf("without names: %q, want none", got)
	}
}

func TestClassSummary(t *testing.T) {
	if got := classSummary([]int{7, 7, 7}, []string{"Sneaker", "Sneaker", "Sneaker"}); got != "class 7 Sneaker (3)" {
		t.Fatalf("one class: %q", got)
	}
	if got := classSummary([]int{1, 2, 1}, []string{"Trouser", "Pullover", "Trouser"}); got != "classes 1 Trouser (2), 2 Pullover (1)" {
		t.Fatalf("two classes: %q", got)
	}
	if got := classSummary([]int{0, 1, 2, 3, 4, 5}, make([]string, 6)); got != "6 classes" {
		t.Fatalf("many classes: %q", got)
	}
}

// Tiny pictures are scaled up in the grid, full-size ones are not.
func TestGridScale(t *testing.T) {
	for _, c := range []struct{ side, cells, want int }{{28, 2, 4}, {7, 1, 16}, {256, 3, 1}, {64, 1, 1}, {32, 2, 3}} {
		pics := make([]image.Image, c.cells)
		for i := range pics {
			pics[i] = image.NewRGBA(image.Rect(0, 0, c.side, c.side))
		}
		if got := gridScale(pics); got != c.want {
			t.Errorf("%dx%d pictures: scale %d, want %d", c.side, c.side, got, c.want)
		}
		if b := LayoutGrid(pics, make([]int, c.cells), nil).Bounds(); b.Dx() < c.cells*c.side*c.want {
			t.Errorf("%d pictures of %d px at scale %d: grid %d px wide", c.cells, c.side, c.want, b.Dx())
		}
	}
	if got := gridScale([]image.Image{nil}); got != 1 {
		t.Errorf("no picture: scale %d, want 1", got)
	}
}
