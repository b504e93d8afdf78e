package fid

import (
	"strings"
	"testing"
)

// IS is reported for a folder of enough images and left out, with the reason, otherwise.
func TestInceptionScoreLine(t *testing.T) {
	probs := make([][]float64, 20)
	for i := range probs {
		probs[i] = []float64{0.7, 0.3}
		if i%2 == 1 {
			probs[i] = []float64{0.2, 0.8}
		}
	}
	if got := inceptionScoreLine("run", probs); !strings.HasPrefix(got, "IS of run: ") || !strings.Contains(got, "(10 splits, shuffled)") {
		t.Errorf("20 images: %q", got)
	}
	if got := inceptionScoreLine("run", probs[:9]); got != "IS left out: run has 9 images, and IS needs at least 10 (one per split)" {
		t.Errorf("9 images: %q", got)
	}
	if got := inceptionScoreLine("ref.npz", nil); !strings.Contains(got, "is a statistics file") {
		t.Errorf("statistics file: %q", got)
	}
}

// Two statistics files need no evaluator: Compare must not open one.
func TestCompareStatisticsFilesOpensNoEvaluator(t *testing.T) {
	dir := t.TempDir()
	acc := NewAccumulator(2)
	for _, f := range [][]float64{{0, 1}, {1, 0}, {2, 2}} {
		acc.Add(f)
	}
	path := dir + "/a.npz"
	if err := WriteStats(path, acc); err != nil {
		t.Fatal(err)
	}
	opened := false
	cmp, err := Compare(func() (*Evaluator, error) { opened = true; return nil, nil }, path, path, nil)
	if err != nil || opened || cmp.FID > 1e-9 || !strings.HasPrefix(cmp.IS, "IS left out") {
		t.Fatalf("comparison %+v, %v, evaluator opened %v", cmp, err, opened)
	}
}
