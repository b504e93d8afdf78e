package onnxrt

import (
	"slices"
	"testing"
)

// Items stacked into a batch, new rows scattered into it and the batch cut back into items:
// every value where the Go arithmetic puts it, the untouched ones bit for bit, and the stack
// trimmed of each item's last position; the items taken
// out of the bindings outlive them and feed the next stack; a fresh set starts from zeros.
func TestStackScatterSplitKeepsItems(t *testing.T) {
	needRuntime(t)
	const n, K, C, W = 3, 2, 4, 3
	ranks := []int{4, 3} // [item, K, C, W] and [item, C, W]
	opt := SessionOptions{IntraOpThreads: 1}
	open := func(model []byte, ins, outs []IOSpec) *Graph {
		g, err := NewGraph(model, "kv", opt, ins, outs)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	sins, souts := StackSpecs(n, ranks)
	stack := open(StackModel(n, ranks, []int{2, 1}), sins, souts) // the position axes
	uins, uouts := ScatterSplitSpecs(n, ranks, false)
	update := open(ScatterSplitModel(n, ranks, false), uins, uouts)
	fins, fouts := ScatterSplitSpecs(n, ranks, true)
	fresh := open(ScatterSplitModel(n, ranks, true), fins, fouts)
	sizes := []int{K * C * W, C * W}
	shapes := [][]int64{{n, K, C, W}, {n, C, W}}
	before := TakenValues()

	// A fresh set: rows (item, k, position) of group 0 and (item, position) of group 1, the
	// index tuples of the data's rank as the cache's are ([..., rank-1]).
	at0 := []int64{0, 0, 1, 0, 1, 3, 2, 1, 0, 2, 1, 2} // (item, k, position) x 4
	at1 := []int64{1, 2, 2, 0}                         // (item, position) x 2
	rows0, rows1 := seq(4*W, 1), seq(2*W, 100)
	b, err := fresh.Bind(true, true, true, true, true, true)
	if err != nil {
		t.Fatal(err)
	}
	must(t, b.SetInputInt64(0, []int64{4}, shapes[0]), b.SetInputInt64(1, []int64{4, 1, 1, 3}, at0), b.SetInput(2, []int64{4, 1, 1, W}, rows0),
		b.SetInputInt64(3, []int64{3}, shapes[1]), b.SetInputInt64(4, []int64{2, 1, 2}, at1), b.SetInput(5, []int64{2, 1, W}, rows1),
		b.Run())
	want := [][]float32{make([]float32, n*sizes[0]), make([]float32, n*sizes[1])}
	scatter(want[0], at0, rows0, []int{K * C * W, C * W, W}, W)
	scatter(want[1], at1, rows1, []int{C * W, W}, W)
	items := take(t, b, n, len(ranks))
	b.Close()
	checkItems(t, "fresh", items, want, sizes)
	if got := TakenValues() - before; got != int64(n*len(ranks)) {
		t.Fatalf("%d values taken, want %d", got, n*len(ranks))
	}

	// The items stacked again (the binding that made them is closed) and updated in place.
	s, err := stack.Bind(true, true, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for g := range ranks {
		for i := 0; i < n; i++ {
			must(t, s.SetValue(g*n+i, items[g][i]))
		}
	}
	must(t, s.Run())
	// the trimmed stacks: every position but the last (C-1) of every item
	for g, rowsPer := range []int{n * K, n} {
		got := make([]float32, rowsPer*(C-1)*W)
		must(t, s.Output(len(ranks)+g).Read(got))
		for r := 0; r < rowsPer; r++ {
			if w, x := want[g][r*C*W:(r*C+C-1)*W], got[r*(C-1)*W:(r+1)*(C-1)*W]; !slices.Equal(w, x) {
				t.Fatalf("trimmed stack %d, row %d: %v, want %v", g, r, x, w)
			}
		}
	}
	u, err := update.Bind(true, true, true, true, true, true)
	if err != nil {
		t.Fatal(err)
	}
	at0b := []int64{2, 1, 3, 0, 0, 0} // item 2 k 1 position 3; item 0 k 0 position 0 again
	at1b := []int64{0, 3}
	rows0b, rows1b := seq(2*W, -50), seq(W, 500)
	must(t, u.SetValue(0, s.Output(0)), u.SetInputInt64(1, []int64{2, 1, 1, 3}, at0b), u.SetInput(2, []int64{2, 1, 1, W}, rows0b),
		u.SetValue(3, s.Output(1)), u.SetInputInt64(4, []int64{1, 1, 2}, at1b), u.SetInput(5, []int64{1, 1, W}, rows1b),
		u.Run())
	scatter(want[0], at0b, rows0b, []int{K * C * W, C * W, W}, W)
	scatter(want[1], at1b, rows1b, []int{C * W, W}, W)
	for g := range items {
		for _, v := range items[g] {
			v.Release()
			v.Release() // twice: no effect
		}
	}
	items = take(t, u, n, len(ranks))
	s.Close()
	u.Close()
	checkItems(t, "updated", items, want, sizes)
	items[0][0].Release()
	if got := TakenValues() - before; got != int64(n*len(ranks)-1) {
		t.Fatalf("%d values alive after one release, want %d", got, n*len(ranks)-1)
	}
	update.Close() // releases the items still taken from its bindings
	if got := TakenValues() - before; got != 0 {
		t.Fatalf("%d values alive after their graph's Close, want 0", got)
	}
	if err := items[1][0].Read(make([]float32, sizes[1])); err == nil {
		t.Fatal("a value read after its graph's Close")
	}
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func seq(n int, from float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = from + float32(i)*0.5
	}
	return v
}

// scatter writes row j of rows (w values) at the index tuple at[j] of strides.
func scatter(dst []float32, at []int64, rows []float32, strides []int, w int) {
	r := len(strides)
	for j := 0; j < len(at)/r; j++ {
		off := 0
		for d, s := range strides {
			off += int(at[j*r+d]) * s
		}
		copy(dst[off:off+w], rows[j*w:(j+1)*w])
	}
}

func take(t *testing.T, b *Binding, n, groups int) [][]*Value {
	t.Helper()
	items := make([][]*Value, groups)
	for g := range items {
		for i := 0; i < n; i++ {
			v, err := b.Take(g*n + i)
			if err != nil {
				t.Fatal(err)
			}
			items[g] = append(items[g], v)
		}
	}
	if _, err := b.Take(0); err == nil {
		t.Fatal("an output taken twice")
	}
	return items
}

func checkItems(t *testing.T, what string, items [][]*Value, want [][]float32, sizes []int) {
	t.Helper()
	for g := range items {
		for i, v := range items[g] {
			got := make([]float32, sizes[g])
			if err := v.Read(got); err != nil {
				t.Fatal(err)
			}
			for j, x := range got {
				if w := want[g][i*sizes[g]+j]; x != w {
					t.Fatalf("%s: group %d item %d value %d = %v, want %v", what, g, i, j, x, w)
				}
			}
		}
	}
}
