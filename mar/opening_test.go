package mar

import (
	"math/rand/v2"
	"testing"

	"marspec/onnxrt"
)

// countingTransformer records the batches it runs; a row's output is its class id, its drop
// flag and how many tokens it knows, so a wrong row in the wrong place shows.
type countingTransformer struct {
	L, D, W int
	batches []int
}

func (c *countingTransformer) SeqLen() int   { return c.L }
func (c *countingTransformer) TokenDim() int { return c.D }
func (c *countingTransformer) Width() int    { return c.W }
func (c *countingTransformer) Forward(tokens, mask []float32, class []int64, drop []float32, batch int, z []float32) error {
	c.batches = append(c.batches, batch)
	for r := 0; r < batch; r++ {
		known := 0
		for _, m := range mask[r*c.L : (r+1)*c.L] {
			if m == 0 {
				known++
			}
		}
		for i := r * c.L * c.W; i < (r+1)*c.L*c.W; i++ {
			z[i] = float32(class[r])*100 + drop[r]*10 + float32(known)
		}
	}
	return nil
}

// openingBatch is rows of classes (drop[i] = 1: "no class"), row i knowing known[i] tokens.
func openingBatch(L, D int, classes []int64, drop []float32, known []int, rng *rand.Rand) (tokens, mask []float32) {
	tokens, mask = make([]float32, len(classes)*L*D), make([]float32, len(classes)*L)
	for i := range tokens {
		tokens[i] = float32(rng.NormFloat64()) // masked tokens hold anything: the graph must not read them
	}
	for r := range classes {
		for p := 0; p < L; p++ {
			if p >= known[r] {
				mask[r*L+p] = 1
			}
		}
	}
	return tokens, mask
}

// The memo runs each opening it has not seen once (a repeated class in one call too), passes
// rows that know tokens through in one call, serves the rest from memory, and puts every row's
// output in its own place; a memo of one entry still gives right answers.
func TestOpeningMemoRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, budget := range []int{1 << 20, 1} {
		inner := &countingTransformer{L: 4, D: 2, W: 3}
		memo := NewOpeningMemo(inner, budget)
		classes := []int64{3, 3, 5, 3, 7}
		drop := []float32{0, 0, 0, 1, 0}
		known := []int{0, 0, 0, 0, 2}
		tokens, mask := openingBatch(4, 2, classes, drop, known, rng)
		for call := 0; call < 2; call++ {
			inner.batches = nil
			z := make([]float32, len(classes)*4*3)
			if err := memo.Forward(tokens, mask, classes, drop, len(classes), z); err != nil {
				t.Fatal(err)
			}
			for r := range classes {
				want := float32(classes[r])*100 + drop[r]*10 + float32(known[r])
				for _, v := range z[r*12 : (r+1)*12] {
					if v != want {
						t.Fatalf("budget %d call %d row %d: %v, want %v", budget, call, r, v, want)
					}
				}
			}
			wantBatches := []int{4} // (3), (5), (3, no class) and the row that knows tokens
			switch {
			case call == 1 && budget > 1:
				wantBatches = []int{1}
			case call == 1: // one entry: the last opening added stays, the other two run again
				wantBatches = []int{3}
			}
			if len(inner.batches) != len(wantBatches) || inner.batches[0] != wantBatches[0] {
				t.Errorf("budget %d call %d: transformer batches %v, want %v", budget, call, inner.batches, wantBatches)
			}
		}
	}
}

// On the embedded target the remembered openings are what the graph gives for them in a batch
// with other rows (masked tokens holding noise), whether computed in this call or served from
// an earlier one.
func TestOpeningMemoMatchesTheGraph(t *testing.T) {
	needRuntime(t)
	pack, err := LoadPackDir("../models/target")
	if err != nil {
		t.Fatal(err)
	}
	m, err := pack.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeModel(m)
	memo, ok := m.Transformer.(*OpeningMemo)
	if !ok {
		t.Fatalf("Pack.Open's transformer is %T, want the opening memo", m.Transformer)
	}
	L, D, W := memo.SeqLen(), memo.TokenDim(), memo.Width()
	rng := rand.New(rand.NewPCG(3, 4))
	classes := []int64{0, 4, 4, 9, 4, 2, 7}
	drop := []float32{0, 0, 0, 1, 1, 0, 0}
	known := []int{0, 0, 0, 0, 0, 10, 30}
	tokens, mask := openingBatch(L, D, classes, drop, known, rng)
	want := make([]float32, len(classes)*L*W)
	if err := memo.Transformer.Forward(tokens, mask, classes, drop, len(classes), want); err != nil {
		t.Fatal(err)
	}
	for call := 0; call < 2; call++ {
		noise, _ := openingBatch(L, D, classes, drop, known, rng) // other noise under the masks
		for i, m := range mask {
			if m == 1 {
				copy(tokens[i*D:(i+1)*D], noise[i*D:(i+1)*D])
			}
		}
		got := make([]float32, len(want))
		if err := memo.Forward(tokens, mask, classes, drop, len(classes), got); err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff32(got, want); d > 0 {
			t.Errorf("call %d: memo differs from the graph by %g", call, d)
		}
	}
	if hits, computed := memo.Stats(); computed != 4 || hits != 6 {
		t.Errorf("openings: %d served, %d computed; want 6 (a repeat, then all five) and 4", hits, computed)
	}
}
