package onnxrt

import (
	"strings"
	"testing"
)

// PickModel takes the rows (batch row, position) names, in the order named, repeats included,
// and nothing else; an int64 input bound as float32 (or the other way round) is refused with
// the input's type named.
func TestPickModelTakesNamedRows(t *testing.T) {
	needRuntime(t)
	const batch, L, W = 3, 5, 4
	ins, outs := PickSpecs(W)
	g, err := NewGraph(PickModel(W), "pick", SessionOptions{IntraOpThreads: 1}, ins, outs)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	z := make([]float32, batch*L*W)
	for i := range z {
		z[i] = float32(i)*0.25 - 7
	}
	at := [][2]int64{{2, 4}, {0, 0}, {1, 3}, {2, 4}, {0, 1}}
	flat := make([]int64, 0, 2*len(at))
	for _, a := range at {
		flat = append(flat, a[0], a[1])
	}
	b, err := g.Bind()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SetInput(0, []int64{batch, L, W}, z); err != nil {
		t.Fatal(err)
	}
	if err := b.SetInputInt64(1, []int64{int64(len(at)), 2}, flat); err != nil {
		t.Fatal(err)
	}
	if err := b.Run(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(at)*W)
	if err := b.Output(0).Read(got); err != nil {
		t.Fatal(err)
	}
	for j, a := range at {
		want := z[(a[0]*L+a[1])*W : (a[0]*L+a[1]+1)*W]
		for c := range want {
			if got[j*W+c] != want[c] {
				t.Fatalf("pick %d (row %d, position %d) value %d = %v, want %v", j, a[0], a[1], c, got[j*W+c], want[c])
			}
		}
	}

	if err := b.SetInputInt64(0, []int64{1, 1, W}, make([]int64, W)); err == nil || !strings.Contains(err.Error(), "input z is float32, bound as int64") {
		t.Errorf("int64 data bound to the float32 input: %v, want the types named", err)
	}
	if err := b.SetInput(1, []int64{1, 2}, []float32{0, 0}); err == nil || !strings.Contains(err.Error(), "input at is int64, bound as float32") {
		t.Errorf("float32 data bound to the int64 input: %v, want the types named", err)
	}
}
