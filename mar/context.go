package mar

// ContextBatch holds, for each row of a transformer batch, the known tokens and the mask.
// Rows may know different numbers of tokens: the transformer masks unknown ones as keys.
type ContextBatch struct {
	Rows, SeqLen, TokenDim int
	Tokens                 []float32 // [Rows, L, D]
	Mask                   []float32 // [Rows, L]; 1 = unknown
	ClassIDs               []int64
	drop                   []float32

	// One guided call runs 2*Rows: these hold the doubled inputs and output between calls.
	tokens2, mask2, drop2, z2 []float32
	class2                    []int64
	// a guided ConditionPicked's picks over both halves' rows and what they pick
	at     [][2]int
	picked []float32
}

// NewContextBatch returns rows with every token unknown.
func NewContextBatch(rows, seqLen, dim int) *ContextBatch {
	c := &ContextBatch{Rows: rows, SeqLen: seqLen, TokenDim: dim,
		Tokens: make([]float32, rows*seqLen*dim), Mask: make([]float32, rows*seqLen),
		ClassIDs: make([]int64, rows), drop: make([]float32, rows)}
	for i := range c.Mask {
		c.Mask[i] = 1
	}
	return c
}

// Set makes token pos of row known with value x.
func (c *ContextBatch) Set(row, pos int, x []float64) {
	dst := c.Tokens[(row*c.SeqLen+pos)*c.TokenDim:]
	for j := 0; j < c.TokenDim; j++ {
		dst[j] = float32(x[j])
	}
	c.Mask[row*c.SeqLen+pos] = 0
}

// Condition runs the transformer: z gets the class-conditional vectors and, when zUncond is
// not nil, zUncond the "no class" ones used by classifier-free guidance. Guided, both halves
// go through one call of 2*Rows rows: one call's fixed cost, and larger matrix products.
func (c *ContextBatch) Condition(t Transformer, z, zUncond []float32) error {
	if zUncond == nil {
		return t.Forward(c.Tokens, c.Mask, c.ClassIDs, c.drop, c.Rows, z)
	}
	out := c.Rows * c.SeqLen * t.Width()
	c.z2 = grow(c.z2, 2*out)
	tokens, mask, class, drop, rows := c.Inputs(true)
	if err := t.Forward(tokens, mask, class, drop, rows, c.z2); err != nil {
		return err
	}
	copy(z[:out], c.z2[:out])
	copy(zUncond[:out], c.z2[out:])
	return nil
}

// Inputs are a transformer call's inputs over the batch: the rows as they are, or, guided, the
// class rows followed by the same rows with "no class" (2*Rows rows, reusing buffers).
func (c *ContextBatch) Inputs(guided bool) (tokens, mask []float32, classIDs []int64, drop []float32, rows int) {
	if !guided {
		return c.Tokens, c.Mask, c.ClassIDs, c.drop, c.Rows
	}
	n := len(c.Tokens)
	c.tokens2 = grow(c.tokens2, 2*n)
	c.mask2 = grow(c.mask2, 2*len(c.Mask))
	c.drop2 = grow(c.drop2, 2*c.Rows)
	if cap(c.class2) < 2*c.Rows {
		c.class2 = make([]int64, 2*c.Rows)
	}
	c.class2 = c.class2[:2*c.Rows]
	for h := 0; h < 2; h++ {
		copy(c.tokens2[h*n:], c.Tokens)
		copy(c.mask2[h*len(c.Mask):], c.Mask)
		copy(c.class2[h*c.Rows:], c.ClassIDs)
		for r := 0; r < c.Rows; r++ {
			c.drop2[h*c.Rows+r] = float32(h)
		}
	}
	return c.tokens2, c.mask2, c.class2, c.drop2, 2 * c.Rows
}
