// Package prefill decides how many leading tokens of each image the target generates alone
// before speculation starts (the paper's token pre-filling: the draft's early guesses are poor
// because both models see almost no context).
package prefill

import (
	"fmt"
	"math"
)

// DefaultRatio is the paper's best setting (5% of the tokens).
const DefaultRatio = 0.05

// Count is ceil(ratio * seqLen), the number of tokens pre-filled by the target.
func Count(ratio float64, seqLen int) (int, error) {
	if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
		return 0, fmt.Errorf("prefill %g out of range (allowed: 0 to 1, a fraction of the tokens)", ratio)
	}
	// the small epsilon keeps 0.05*20 = 1.0000000000000002 from becoming 2
	return min(seqLen, int(math.Ceil(ratio*float64(seqLen)-1e-9))), nil
}
