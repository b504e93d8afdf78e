package generation

import (
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
