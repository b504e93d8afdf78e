package mar

import (
	"math/rand/v2"
	"testing"
)

func TestStepSizesCoverAllTokens(t *testing.T) {
	for _, numIter := range []int{1, 2, 8, 16, 48, 49, 64} {
		sizes := StepSizes(49, numIter)
		total := 0
		for _, s := range sizes {
			if s < 1 {
				t.Fatalf("numIter %d: a step decodes %d tokens", numIter, s)
			}
			total += s
		}
		if total != 49 {
			t.Fatalf("numIter %d: decoded %d tokens, want 49", numIter, total)
		}
		if numIter <= 49 && len(sizes) != numIter {
			t.Fatalf("numIter %d: %d steps", numIter, len(sizes))
		}
	}
	for _, s := range StepSizes(49, 49) {
		if s != 1 {
			t.Fatalf("one token per step expected, got %v", StepSizes(49, 49))
		}
	}
	// cosine schedule decodes few tokens first, many last
	sizes := StepSizes(256, 64)
	if sizes[0] >= sizes[len(sizes)-1] {
		t.Fatalf("cosine schedule should grow: first %d last %d", sizes[0], sizes[len(sizes)-1])
	}
}

func TestRandomOrderIsPermutation(t *testing.T) {
	o := RandomOrder(rand.New(rand.NewPCG(1, 2)), 49)
	seen := map[int]bool{}
	for _, p := range o {
		if p < 0 || p >= 49 || seen[p] {
			t.Fatalf("not a permutation: %v", o)
		}
		seen[p] = true
	}
}
