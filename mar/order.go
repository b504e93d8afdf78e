package mar

import (
	"math"
	"math/rand/v2"
)

// orderRNG is the random source of one image's generation order.
func orderRNG(seed uint64, image int) *rand.Rand {
	return rand.New(rand.NewPCG(seed^0xbb67ae8584caa73b, uint64(image)))
}

// OrderFor is the generation order of image `image` under seed.
func OrderFor(seed uint64, image, seqLen int) []int {
	return RandomOrder(orderRNG(seed, image), seqLen)
}

// RandomOrder is the generation order of one image: a uniformly random permutation of the
// L grid positions, as in MAR.
func RandomOrder(rng *rand.Rand, seqLen int) []int {
	return rng.Perm(seqLen)
}

// StepSizes splits L tokens over numIter AR steps with MAR's cosine mask schedule: after step
// k (0-based) floor(L*cos(pi/2*(k+1)/numIter)) tokens stay masked, at least one token is
// decoded per step and the last step decodes all that remain. numIter == L gives one token per
// step (the paper's setting).
func StepSizes(seqLen, numIter int) []int {
	sizes := make([]int, 0, numIter)
	masked := seqLen
	for k := 0; k < numIter && masked > 0; k++ {
		next := int(math.Floor(float64(seqLen) * math.Cos(math.Pi/2*float64(k+1)/float64(numIter))))
		if k == numIter-1 {
			next = 0
		} else {
			next = max(1, min(masked-1, next))
			if masked == 1 {
				next = 0
			}
		}
		sizes = append(sizes, masked-next)
		masked = next
	}
	return sizes
}
