package mar

import (
	"time"

	"marspec/onnxrt"
)

// CachedTransformer runs a pack's transformer_cached.onnx (docs/model-pack.md): one call runs
// chosen encoder and decoder query positions through every block, against cached K/V of the
// others, and hands back the queries' fresh K/V for the caller's cache.
type CachedTransformer struct {
	g                    *onnxrt.Graph
	L, D, W, S, buf      int
	encBlocks, decBlocks int
	// OnRun, when set, gets each call's duration (bench --cache times the cached calls).
	OnRun func(time.Duration)
}

// NewCachedTransformer opens the graph and checks its inputs and outputs against the pack.
func NewCachedTransformer(data []byte, m *Manifest, opt onnxrt.SessionOptions, source string) (*CachedTransformer, error) {
	return newCachedTransformer(data, "", m, opt, source)
}

// newCachedTransformer opens the graph from file when it is set (weights in external data).
func newCachedTransformer(data []byte, file string, m *Manifest, opt onnxrt.SessionOptions, source string) (*CachedTransformer, error) {
	L, D, W := int64(m.SeqLen()), int64(m.TokenDim), int64(m.Width)
	E, Dd := int64(m.Cache.EncoderBlocks), int64(m.Cache.DecoderBlocks)
	// -1 batch, -2 cached positions, -3 encoder queries, -4 decoder queries
	inputs := []onnxrt.IOSpec{
		{Name: "tokens", Shape: []int64{-1, L, D}}, {Name: "mask", Shape: []int64{-1, L}},
		{Name: "class_ids", Int64: true, Shape: []int64{-1}}, {Name: "drop_class", Shape: []int64{-1}},
		{Name: "enc_kv", Shape: []int64{-1, E, 2, -2, W}}, {Name: "enc_out", Shape: []int64{-1, -2, W}},
		{Name: "enc_keep", Shape: []int64{-1, -2}},
		{Name: "dec_kv", Shape: []int64{-1, Dd, 2, -2, W}}, {Name: "dec_keep", Shape: []int64{-1, -2}},
		{Name: "enc_pos", Int64: true, Shape: []int64{-1, -3}}, {Name: "enc_valid", Shape: []int64{-1, -3}},
		{Name: "dec_pos", Int64: true, Shape: []int64{-1, -4}}, {Name: "dec_valid", Shape: []int64{-1, -4}},
		{Name: "dec_src", Int64: true, Shape: []int64{-1, -4}},
	}
	outputs := []onnxrt.IOSpec{
		{Name: "z", Shape: []int64{-1, -4, W}}, {Name: "enc_kv_new", Shape: []int64{-1, E, 2, -3, W}},
		{Name: "enc_out_new", Shape: []int64{-1, -3, W}}, {Name: "dec_kv_new", Shape: []int64{-1, Dd, 2, -4, W}},
	}
	g, err := openGraph(data, file, source, opt, inputs, outputs)
	if err != nil {
		return nil, err
	}
	// one set of bound tensors: its K/V tensors are large at every size (MAR-B: 47 MB a row in,
	// as much out) and a full pass's query count changes every step (the known tokens), so
	// kept sets were rarely reused but held (4 of them: 515 MB of Go heap at MAR-B with
	// guidance, measured); lazy steps of one padded size still reuse theirs
	g.SetKeep(1)
	return &CachedTransformer{g: g, L: int(L), D: int(D), W: int(W), S: int(L) + m.BufferSize, buf: m.BufferSize,
		encBlocks: int(E), decBlocks: int(Dd)}, nil
}

// Close releases the session.
func (t *CachedTransformer) Close() error { return t.g.Close() }

// tokenCache is one image half's cache (class or "no class"), indexed by position over
// buffer + L.
type tokenCache struct {
	encKV  []float32 // [E, 2, S, W]: encoder K and V per block
	encOut []float32 // [S, W]: the encoder's output (the decoder's input before positions)
	encHas []bool    // [S]: encKV and encOut hold this position
	decKV  []float32 // [Dd, 2, S, W]
	fresh  []int     // [S]: the AR step the decoder K/V of a position were computed at; -1 never
}

func (t *CachedTransformer) newTokenCache() *tokenCache {
	c := &tokenCache{encKV: make([]float32, t.encBlocks*2*t.S*t.W), encOut: make([]float32, t.S*t.W),
		encHas: make([]bool, t.S), decKV: make([]float32, t.decBlocks*2*t.S*t.W), fresh: make([]int, t.S)}
	for i := range c.fresh {
		c.fresh[i] = -1
	}
	return c
}

// cacheUnit is one row of a cached call: an image half, its context and its queries.
type cacheUnit struct {
	cache        *tokenCache // nil: nothing is written back (a half no lazy step reads)
	tokens, mask []float32   // [L*D], [L]
	class        int64
	drop         float32
	step         int       // the AR step, recorded as the age of the decoder K/V written
	encQ, decR   []int     // query positions over buffer + L
	z            []float32 // out: [len(decR), W]
}

// roundUp pads a query count to a multiple of 8, so that lazy steps of nearby sizes reuse one
// set of bound tensors instead of allocating K/V-sized ones every step.
func roundUp(n int) int { return max(8, (n+7)/8*8) }

// run makes one call over units: full (nothing cached is read; the cache is replaced by the
// queries' K/V) or lazy.
func (t *CachedTransformer) run(units []cacheUnit, full bool) error {
	if t.OnRun != nil {
		defer func(start time.Time) { t.OnRun(time.Since(start)) }(time.Now())
	}
	return t.call(units, full)
}

// call is run without the timing hook.
func (t *CachedTransformer) call(units []cacheUnit, full bool) error {
	B, S, W, L, D := len(units), t.S, t.W, t.L, t.D
	Q, R := 1, 1
	for _, u := range units {
		Q, R = max(Q, len(u.encQ)), max(R, len(u.decR))
	}
	C := S
	if full {
		C = 1 // a dummy entry nothing attends to
	} else {
		Q, R = roundUp(Q), roundUp(R)
	}
	E, Dd := t.encBlocks, t.decBlocks
	return t.g.RunDims(onnxrt.Dims{B, C, Q, R}, func(in, _ onnxrt.Tensors) error {
		tokens, mask, class, drop := in.F32(0), in.F32(1), in.I64(2), in.F32(3)
		encKV, encOut, encKeep, decKV, decKeep := in.F32(4), in.F32(5), in.F32(6), in.F32(7), in.F32(8)
		encPos, encValid, decPos, decValid, decSrc := in.I64(9), in.F32(10), in.I64(11), in.F32(12), in.I64(13)
		for b, u := range units {
			copy(tokens[b*L*D:(b+1)*L*D], u.tokens)
			copy(mask[b*L:(b+1)*L], u.mask)
			class[b], drop[b] = u.class, u.drop
			if full {
				clear(encKV[b*E*2*W : (b+1)*E*2*W])
				clear(encOut[b*W : (b+1)*W])
				clear(decKV[b*Dd*2*W : (b+1)*Dd*2*W])
				encKeep[b], decKeep[b] = 0, 0
			} else {
				copy(encKV[b*E*2*S*W:], u.cache.encKV)
				copy(encOut[b*S*W:], u.cache.encOut)
				copy(decKV[b*Dd*2*S*W:], u.cache.decKV)
				for p := 0; p < S; p++ {
					encKeep[b*S+p] = boolF32(u.cache.encHas[p])
					decKeep[b*S+p] = 1
				}
				for _, p := range u.decR {
					decKeep[b*S+p] = 0 // its fresh K/V replace the cached ones
				}
			}
			encAt := map[int]int{}
			for i := 0; i < Q; i++ {
				encPos[b*Q+i], encValid[b*Q+i] = 0, 0
				if i < len(u.encQ) {
					encPos[b*Q+i], encValid[b*Q+i] = int64(u.encQ[i]), 1
					encAt[u.encQ[i]] = i
				}
			}
			for i := 0; i < R; i++ {
				decPos[b*R+i], decValid[b*R+i], decSrc[b*R+i] = 0, 0, 0
				if i >= len(u.decR) {
					continue
				}
				p := u.decR[i]
				decPos[b*R+i], decValid[b*R+i] = int64(p), 1
				if j, ok := encAt[p]; ok {
					decSrc[b*R+i] = int64(C + j) // fresh encoder output
				} else if !full {
					decSrc[b*R+i] = int64(p) // cached (or, for an unknown position, unused)
				}
			}
		}
		return nil
	}, func(out onnxrt.Tensors) error {
		z, encKVNew, encOutNew, decKVNew := out.F32(0), out.F32(1), out.F32(2), out.F32(3)
		for b, u := range units {
			copy(u.z, z[b*R*W:b*R*W+len(u.decR)*W])
			c := u.cache
			if c == nil {
				continue
			}
			if full {
				clear(c.encHas)
			}
			for i, p := range u.encQ {
				for l := 0; l < E*2; l++ { // block l/2, K (even) or V (odd)
					copy(c.encKV[(l*S+p)*W:(l*S+p+1)*W], encKVNew[((b*E*2+l)*Q+i)*W:])
				}
				copy(c.encOut[p*W:(p+1)*W], encOutNew[(b*Q+i)*W:])
				c.encHas[p] = true
			}
			for i, p := range u.decR {
				for l := 0; l < Dd*2; l++ {
					copy(c.decKV[(l*S+p)*W:(l*S+p+1)*W], decKVNew[((b*Dd*2+l)*R+i)*W:])
				}
				c.fresh[p] = u.step
			}
		}
		return nil
	})
}

func boolF32(b bool) float32 {
	if b {
		return 1
	}
	return 0
}
