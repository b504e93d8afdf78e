package diffusion

import "math/rand/v2"

// TokenNoise is the Gaussian noise one token's reverse diffusion consumes: the starting point
// x_T and one epsilon per sampling step. It depends only on (seed, image, position), never on
// the order or batch in which tokens are generated: batching does not change an image, and two
// models given the same TokenNoise follow aligned trajectories.
type TokenNoise struct {
	XT  []float64   // [D]
	Eps [][]float64 // [steps][D]; Eps[i] is used by the i-th step taken (respaced index steps-1-i)
}

// NewTokenNoise draws the noise of one token position.
func NewTokenNoise(seed uint64, image, pos, steps, dim int) *TokenNoise {
	rng := rand.New(rand.NewPCG(seed^0x6a09e667f3bcc908, uint64(image)<<20|uint64(pos)))
	all := make([]float64, (steps+1)*dim) // x_T, then each step's epsilon: the order they are drawn in
	for i := range all {
		all[i] = rng.NormFloat64()
	}
	n := &TokenNoise{XT: all[:dim:dim], Eps: make([][]float64, steps)}
	for s := range n.Eps {
		n.Eps[s] = all[(s+1)*dim : (s+2)*dim : (s+2)*dim]
	}
	return n
}

// NewTokenNoiseSalted is NewTokenNoise from an independent stream: what a model that does not
// share noise (no trajectory alignment) uses.
func NewTokenNoiseSalted(seed, salt uint64, image, pos, steps, dim int) *TokenNoise {
	return NewTokenNoise(seed^(salt*0x9e3779b97f4a7c15), image, pos, steps, dim)
}
