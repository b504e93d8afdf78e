package mar

import (
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
)

// OpeningMemoBytes bounds what Pack.Open's opening memo keeps: 64 MiB holds every opening of
// the embedded target many times over, and about 40 classes of MAR-B (256 tokens of width 768,
// class and "no class" halves).
const OpeningMemoBytes = 64 << 20

// OpeningMemo is a Transformer that computes a row knowing no token once per class. Such a
// row's conditions depend only on its class id and on whether the class is dropped: the
// encoder sees no token, and the decoder puts its mask token at every position. That row is
// the first AR step of every image (both halves of a guided one), one of only 3 or 4 passes
// at the presets' schedules, so a server that has seen a class skips it. Rows of a call are
// computed together in the underlying transformer whatever their neighbours, so a remembered
// row is the one a fresh call returns (TestOpeningMemoMatchesTheGraph holds the graphs to it).
type OpeningMemo struct {
	Transformer
	mu       sync.Mutex
	memo     *lru.Cache[openingKey, []float32]
	hits     int
	computed int

	// reused between calls: the rows a call still has to run, gathered; its openings; the
	// openings to compute (key -> the row that computes it) and those served from memory
	// (held here: adding may evict them)
	tokens, mask, drop, z []float32
	class                 []int64
	rows, openings        []int
	pending               map[openingKey]int
	known                 map[openingKey][]float32
}

type openingKey struct {
	class   int64
	dropped bool
}

// NewOpeningMemo wraps t, keeping at most maxBytes of openings (at least one), least recently
// used first out.
func NewOpeningMemo(t Transformer, maxBytes int) *OpeningMemo {
	entry := t.SeqLen() * t.Width() * 4
	memo, _ := lru.New[openingKey, []float32](max(1, maxBytes/entry)) // size >= 1 cannot fail
	return &OpeningMemo{Transformer: t, memo: memo, pending: map[openingKey]int{}, known: map[openingKey][]float32{}}
}

// Stats are the openings served from memory and the ones computed since the memo was made.
func (o *OpeningMemo) Stats() (hits, computed int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits, o.computed
}

// Close closes the wrapped transformer.
func (o *OpeningMemo) Close() error {
	if c, ok := o.Transformer.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// Forward fills remembered opening rows from memory and runs the others, the openings it
// has not seen once each, in one call of the wrapped transformer.
func (o *OpeningMemo) Forward(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, z []float32) error {
	L, D, W := o.SeqLen(), o.TokenDim(), o.Width()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rows, o.openings = o.rows[:0], o.openings[:0]
	pending, known := o.pending, o.known
	clear(pending)
	clear(known)
	for r := 0; r < batch; r++ {
		if !knowsNothing(mask[r*L : (r+1)*L]) {
			o.rows = append(o.rows, r)
			continue
		}
		o.openings = append(o.openings, r)
		k := openingKey{classIDs[r], dropClass[r] != 0}
		if _, ok := known[k]; ok {
			continue
		}
		if out, ok := o.memo.Get(k); ok {
			known[k] = out
			continue
		}
		if _, ok := pending[k]; !ok {
			pending[k] = r
			o.rows = append(o.rows, r)
		}
	}
	if len(o.openings) == 0 {
		return o.Transformer.Forward(tokens, mask, classIDs, dropClass, batch, z)
	}
	switch {
	case len(o.rows) == batch: // nothing remembered, nothing repeated: the call as it came
		if err := o.Transformer.Forward(tokens, mask, classIDs, dropClass, batch, z); err != nil {
			return err
		}
	case len(o.rows) > 0:
		if err := o.forwardRows(tokens, mask, classIDs, dropClass, z, L, D, W); err != nil {
			return err
		}
	}
	for k, r := range pending {
		o.memo.Add(k, append([]float32(nil), z[r*L*W:(r+1)*L*W]...))
		o.computed++
	}
	for _, r := range o.openings {
		k := openingKey{classIDs[r], dropClass[r] != 0}
		out, ok := known[k]
		if !ok {
			pr := pending[k]
			if pr == r {
				continue
			}
			out = z[pr*L*W : (pr+1)*L*W]
		}
		copy(z[r*L*W:(r+1)*L*W], out)
		o.hits++
	}
	return nil
}

// forwardRows runs the rows in o.rows as one call and scatters their outputs into z.
func (o *OpeningMemo) forwardRows(tokens, mask []float32, classIDs []int64, dropClass []float32, z []float32, L, D, W int) error {
	n := len(o.rows)
	o.tokens, o.mask, o.drop, o.z = grow(o.tokens, n*L*D), grow(o.mask, n*L), grow(o.drop, n), grow(o.z, n*L*W)
	o.class = append(o.class[:0], make([]int64, n)...)
	for i, r := range o.rows {
		copy(o.tokens[i*L*D:(i+1)*L*D], tokens[r*L*D:(r+1)*L*D])
		copy(o.mask[i*L:(i+1)*L], mask[r*L:(r+1)*L])
		o.class[i], o.drop[i] = classIDs[r], dropClass[r]
	}
	if err := o.Transformer.Forward(o.tokens, o.mask, o.class, o.drop, n, o.z); err != nil {
		return err
	}
	for i, r := range o.rows {
		copy(z[r*L*W:(r+1)*L*W], o.z[i*L*W:(i+1)*L*W])
	}
	return nil
}

// knowsNothing reports whether a row's mask marks every token unknown.
func knowsNothing(mask []float32) bool {
	for _, m := range mask {
		if m == 0 {
			return false
		}
	}
	return true
}

// Unmemoized is the transformer under an opening memo (t itself otherwise): what benchmarks
// time when they measure graph passes, which a memo's answers would hide.
func Unmemoized(t Transformer) Transformer {
	if o, ok := t.(*OpeningMemo); ok {
		return o.Transformer
	}
	return t
}
