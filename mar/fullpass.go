package mar

// FullPasses is the cached graph as the model's Transformer: each Forward is a full pass
// (every known token through the encoder, every position through the decoder) whose K/V are
// not kept. A pack with a cached graph opens only that graph at fp32, so its weights are held
// once, not twice beside transformer.onnx's; its full pass is transformer.onnx's up to
// summation order (TestCachedGraphFullPassMatchesTransformer). The cache's own timing hook
// (OnRun) does not see these passes: they are the plain passes a benchmark times as such.
type FullPasses struct{ *CachedTransformer }

// Forward fills z [batch, L, W] as transformer.onnx does.
func (f FullPasses) Forward(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, z []float32) error {
	units, err := f.pass(tokens, mask, classIDs, dropClass, batch)
	if err != nil {
		return err
	}
	L, W, buf := f.L, f.W, f.buf
	for b, u := range units {
		copy(z[b*L*W:(b+1)*L*W], u.z[buf*W:])
	}
	return nil
}

// pass runs the full passes; each unit's z holds [S, W], the class buffer's positions first.
func (f FullPasses) pass(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int) ([]cacheUnit, error) {
	t := f.CachedTransformer
	L, D, W, S, buf := t.L, t.D, t.W, t.S, t.buf
	all := make([]int, S)
	for p := range all {
		all[p] = p
	}
	units := make([]cacheUnit, batch)
	for b := range units {
		m := mask[b*L : (b+1)*L]
		encQ := make([]int, 0, S)
		for p := 0; p < S; p++ {
			if p < buf || m[p-buf] == 0 {
				encQ = append(encQ, p)
			}
		}
		units[b] = cacheUnit{tokens: tokens[b*L*D : (b+1)*L*D], mask: m, class: classIDs[b], drop: dropClass[b],
			encQ: encQ, decR: all, z: make([]float32, S*W)}
	}
	if err := t.call(units, true); err != nil {
		return nil, err
	}
	return units, nil
}

// SeqLen is L.
func (f FullPasses) SeqLen() int { return f.L }

// TokenDim is D.
func (f FullPasses) TokenDim() int { return f.D }

// Width is W.
func (f FullPasses) Width() int { return f.W }

// ForwardPicked is Forward that copies out only the rows at (row, position).
func (f FullPasses) ForwardPicked(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, at [][2]int, z []float32) error {
	if err := checkPicks(at, batch, f.L, f.W, z); err != nil {
		return err
	}
	units, err := f.pass(tokens, mask, classIDs, dropClass, batch)
	if err != nil {
		return err
	}
	buf, W := f.buf, f.W
	for j, a := range at {
		copy(z[j*W:(j+1)*W], units[a[0]].z[(buf+a[1])*W:])
	}
	return nil
}
