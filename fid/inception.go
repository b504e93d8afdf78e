package fid

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// InceptionScore is exp(E_x KL(p(y|x) || p(y))) over `splits` equal consecutive parts of
// probs (rows of class probabilities), returned as mean and standard deviation (ddof 0) over
// the parts, as the usual implementations do. Rows must be probability vectors.
func InceptionScore(probs [][]float64, splits int) (mean, std float64, err error) {
	n := len(probs)
	if splits < 1 || n < splits {
		return 0, 0, fmt.Errorf("inception score needs at least %d images for %d splits, have %d", splits, splits, n)
	}
	k := len(probs[0])
	scores := make([]float64, splits)
	for s := 0; s < splits; s++ {
		part := probs[s*n/splits : (s+1)*n/splits]
		py := make([]float64, k)
		for _, p := range part {
			if len(p) != k {
				return 0, 0, fmt.Errorf("probability rows differ in length: %d and %d", len(p), k)
			}
			for j, v := range p {
				if math.IsNaN(v) || v < 0 {
					return 0, 0, fmt.Errorf("probability %v is not valid", v)
				}
				py[j] += v / float64(len(part))
			}
		}
		kl := 0.0
		for _, p := range part {
			for j, v := range p {
				if v > 0 {
					kl += v * (math.Log(v) - math.Log(py[j]))
				}
			}
		}
		scores[s] = math.Exp(kl / float64(len(part)))
	}
	for _, v := range scores {
		mean += v / float64(splits)
	}
	for _, v := range scores {
		std += (v - mean) * (v - mean) / float64(splits)
	}
	return mean, math.Sqrt(std), nil
}

// Softmax turns logits into probabilities (in float64, max-shifted for stability).
func Softmax(logits []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, float64(v))
	}
	out := make([]float64, len(logits))
	sum := 0.0
	for i, v := range logits {
		out[i] = math.Exp(float64(v) - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// ShuffledInceptionScore shuffles the rows with a fixed seed before splitting, as the common
// tools do: files sorted by name often come grouped by class, and a split holding one class
// would score about 1 whatever the images look like.
func ShuffledInceptionScore(probs [][]float64, splits int, seed uint64) (mean, std float64, err error) {
	shuffled := append([][]float64(nil), probs...)
	rng := rand.New(rand.NewPCG(seed, 0x15))
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	return InceptionScore(shuffled, splits)
}
