package mar

// ContextBatch holds, for each row of a transformer batch, the known tokens and the mask.
// Rows may know different numbers of tokens: the transformer masks unknown ones as keys.
type ContextBatch struct {
	Rows, SeqLen, TokenDim int
	Tokens                 []float32 // [Rows, L, D]
	Mask                   []float32 // [Rows, L]; 1 = unknown
	ClassIDs               []int64
	drop, dropAll          []float32
}

// NewContextBatch returns rows with every token unknown.
func NewContextBatch(rows, seqLen, dim int) *ContextBatch {
	c := &ContextBatch{Rows: rows, SeqLen: seqLen, TokenDim: dim,
		Tokens: make([]float32, rows*seqLen*dim), Mask: make([]float32, rows*seqLen),
		ClassIDs: make([]int64, rows), drop: make([]float32, rows), dropAll: make([]float32, rows)}
	for i := range c.Mask {
		c.Mask[i] = 1
	}
	for i := range c.dropAll {
		c.dropAll[i] = 1
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
// not nil, zUncond the "no class" ones used by classifier-free guidance.
func (c *ContextBatch) Condition(t Transformer, z, zUncond []float32) error {
	if err := t.Forward(c.Tokens, c.Mask, c.ClassIDs, c.drop, c.Rows, z); err != nil {
		return err
	}
	if zUncond == nil {
		return nil
	}
	return t.Forward(c.Tokens, c.Mask, c.ClassIDs, c.dropAll, c.Rows, zUncond)
}
