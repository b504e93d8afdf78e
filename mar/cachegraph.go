package mar

import (
	"errors"
	"fmt"
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
	// kv moves the cache where the graph runs when it lives there (cacheOnDeviceWanted); nil:
	// the cache lives in Go memory
	kv *kvGraphs
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
	inputs := append(contextInputs(m), []onnxrt.IOSpec{
		{Name: "enc_kv", Shape: []int64{-1, E, 2, -2, W}}, {Name: "enc_out", Shape: []int64{-1, -2, W}},
		{Name: "enc_keep", Shape: []int64{-1, -2}},
		{Name: "dec_kv", Shape: []int64{-1, Dd, 2, -2, W}}, {Name: "dec_keep", Shape: []int64{-1, -2}},
		{Name: "enc_pos", Int64: true, Shape: []int64{-1, -3}}, {Name: "enc_valid", Shape: []int64{-1, -3}},
		{Name: "dec_pos", Int64: true, Shape: []int64{-1, -4}}, {Name: "dec_valid", Shape: []int64{-1, -4}},
		{Name: "dec_src", Int64: true, Shape: []int64{-1, -4}},
	}...)
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
	t := &CachedTransformer{g: g, L: int(L), D: int(D), W: int(W), S: int(L) + m.BufferSize, buf: m.BufferSize,
		encBlocks: int(E), decBlocks: int(Dd)}
	if cacheOnDeviceWanted(opt.Device) {
		t.kv = newKVGraphs(opt, source)
	}
	return t, nil
}

// Close releases the session and every cache kept on the device.
func (t *CachedTransformer) Close() error {
	var err error
	if t.kv != nil {
		err = t.kv.close()
	}
	return errors.Join(err, t.g.Close())
}

// tokenCache is one image half's cache (class or "no class"), indexed by position over
// buffer + L.
type tokenCache struct {
	encKV  []float32 // [E, 2, S, W]: encoder K and V per block
	encOut []float32 // [S, W]: the encoder's output (the decoder's input before positions)
	encHas []bool    // [S]: the cache holds this position's encoder K/V and output
	decKV  []float32 // [Dd, 2, S, W]
	fresh  []int     // [S]: the AR step the decoder K/V of a position were computed at; -1 never
	// dev holds encKV, encOut and decKV instead when the cache lives where the graph runs
	// (then those three are nil); nil before the half's first full pass
	dev *deviceKV
}

func (t *CachedTransformer) newTokenCache() *tokenCache {
	c := &tokenCache{encHas: make([]bool, t.S), fresh: make([]int, t.S)}
	if t.kv == nil {
		c.encKV, c.encOut = make([]float32, t.encBlocks*2*t.S*t.W), make([]float32, t.S*t.W)
		c.decKV = make([]float32, t.decBlocks*2*t.S*t.W)
	}
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
	if t.kv != nil {
		if err := t.callOnDevice(units, full); err != nil {
			return fmt.Errorf("cache kept on the device (MARSPEC_CACHE_ON_DEVICE=off keeps it in host memory instead): %w", err)
		}
		return nil
	}
	B, S, W, L, D := len(units), t.S, t.W, t.L, t.D
	C, Q, R := t.callShape(units, full)
	E, Dd := t.encBlocks, t.decBlocks
	return t.g.RunDims(onnxrt.Dims{B, C, Q, R}, func(in, _ onnxrt.Tensors) error {
		small := cachedInputs{B: B, C: C, Q: Q, R: R, S: S,
			tokens: in.F32(0), mask: in.F32(1), class: in.I64(2), drop: in.F32(3), encKeep: in.F32(6), decKeep: in.F32(8),
			encPos: in.I64(9), encValid: in.F32(10), decPos: in.I64(11), decValid: in.F32(12), decSrc: in.I64(13)}
		small.fill(units, full, L, D)
		encKV, encOut, decKV := in.F32(4), in.F32(5), in.F32(7)
		for b, u := range units {
			if full {
				clear(encKV[b*E*2*W : (b+1)*E*2*W])
				clear(encOut[b*W : (b+1)*W])
				clear(decKV[b*Dd*2*W : (b+1)*Dd*2*W])
			} else {
				copy(encKV[b*E*2*S*W:], u.cache.encKV)
				copy(encOut[b*S*W:], u.cache.encOut)
				copy(decKV[b*Dd*2*S*W:], u.cache.decKV)
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
			for i, p := range u.encQ {
				for l := 0; l < E*2; l++ { // block l/2, K (even) or V (odd)
					copy(c.encKV[(l*S+p)*W:(l*S+p+1)*W], encKVNew[((b*E*2+l)*Q+i)*W:])
				}
				copy(c.encOut[p*W:(p+1)*W], encOutNew[(b*Q+i)*W:])
			}
			for i, p := range u.decR {
				for l := 0; l < Dd*2; l++ {
					copy(c.decKV[(l*S+p)*W:(l*S+p+1)*W], decKVNew[((b*Dd*2+l)*R+i)*W:])
				}
			}
			c.record(u, full)
		}
		return nil
	})
}

// callShape is a call's count of cached positions C and of encoder and decoder queries per
// unit, Q and R: a full pass reads a one-entry dummy cache; a lazy call's query counts are
// padded to a multiple of 8, so that nearby steps reuse one set of bound tensors.
func (t *CachedTransformer) callShape(units []cacheUnit, full bool) (C, Q, R int) {
	Q, R = 1, 1
	for _, u := range units {
		Q, R = max(Q, len(u.encQ)), max(R, len(u.decR))
	}
	if full {
		return 1, Q, R
	}
	return t.S, roundUp(Q), roundUp(R)
}

// cachedInputs are a cached call's inputs but the K/V: B units, C cached positions (S of
// them real), Q encoder and R decoder queries per unit.
type cachedInputs struct {
	B, C, Q, R, S          int
	tokens, mask, drop     []float32
	class                  []int64
	encKeep, decKeep       []float32
	encPos, decPos, decSrc []int64
	encValid, decValid     []float32
}

// fill writes the inputs of units, allocating those not set.
func (in *cachedInputs) fill(units []cacheUnit, full bool, L, D int) {
	B, C, Q, R, S := in.B, in.C, in.Q, in.R, in.S
	f32 := func(s *[]float32, n int) {
		if *s == nil {
			*s = make([]float32, n)
		}
	}
	i64 := func(s *[]int64, n int) {
		if *s == nil {
			*s = make([]int64, n)
		}
	}
	f32(&in.tokens, B*L*D)
	f32(&in.mask, B*L)
	f32(&in.drop, B)
	i64(&in.class, B)
	f32(&in.encKeep, B*C)
	f32(&in.decKeep, B*C)
	i64(&in.encPos, B*Q)
	f32(&in.encValid, B*Q)
	i64(&in.decPos, B*R)
	f32(&in.decValid, B*R)
	i64(&in.decSrc, B*R)
	for b, u := range units {
		copy(in.tokens[b*L*D:(b+1)*L*D], u.tokens)
		copy(in.mask[b*L:(b+1)*L], u.mask)
		in.class[b], in.drop[b] = u.class, u.drop
		for p := 0; p < C; p++ {
			in.encKeep[b*C+p], in.decKeep[b*C+p] = 0, 0
			if !full && p < S {
				in.encKeep[b*C+p], in.decKeep[b*C+p] = boolF32(u.cache.encHas[p]), 1
			}
		}
		if !full {
			for _, p := range u.decR {
				in.decKeep[b*C+p] = 0 // its fresh K/V replace the cached ones
			}
		}
		encAt := map[int]int{}
		for i := 0; i < Q; i++ {
			in.encPos[b*Q+i], in.encValid[b*Q+i] = 0, 0
			if i < len(u.encQ) {
				in.encPos[b*Q+i], in.encValid[b*Q+i] = int64(u.encQ[i]), 1
				encAt[u.encQ[i]] = i
			}
		}
		for i := 0; i < R; i++ {
			in.decPos[b*R+i], in.decValid[b*R+i], in.decSrc[b*R+i] = 0, 0, 0
			if i >= len(u.decR) {
				continue
			}
			p := u.decR[i]
			in.decPos[b*R+i], in.decValid[b*R+i] = int64(p), 1
			if j, ok := encAt[p]; ok {
				in.decSrc[b*R+i] = int64(C + j) // fresh encoder output
			} else if !full {
				in.decSrc[b*R+i] = int64(p) // cached (or, for an unknown position, unused)
			}
		}
	}
}

// writePlaces are the index tuples where a call's new rows go in the device cache's tensors
// (stacked: unit first): encoder K/V (unit, block, K or V, position), encoder output (unit,
// position), decoder K/V. A padding query's rows go to position S, which no call reads.
func (in *cachedInputs) writePlaces(units []cacheUnit, E, Dd int) (enc, out, dec []int64) {
	B, Q, R, S := in.B, in.Q, in.R, in.S
	at := func(list []int, i int) int64 {
		if i < len(list) {
			return int64(list[i])
		}
		return int64(S)
	}
	enc = make([]int64, 0, B*E*2*Q*4)
	out = make([]int64, 0, B*Q*2)
	dec = make([]int64, 0, B*Dd*2*R*4)
	for b, u := range units {
		for l := 0; l < E*2; l++ {
			for i := 0; i < Q; i++ {
				enc = append(enc, int64(b), int64(l/2), int64(l%2), at(u.encQ, i))
			}
		}
		for i := 0; i < Q; i++ {
			out = append(out, int64(b), at(u.encQ, i))
		}
		for l := 0; l < Dd*2; l++ {
			for i := 0; i < R; i++ {
				dec = append(dec, int64(b), int64(l/2), int64(l%2), at(u.decR, i))
			}
		}
	}
	return enc, out, dec
}

func boolF32(b bool) float32 {
	if b {
		return 1
	}
	return 0
}
