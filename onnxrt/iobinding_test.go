package onnxrt

import (
	"strings"
	"testing"
)

// chain opens two MatMul graphs, a: [batch, k] -> [batch, m] and b: [batch, m] -> [batch, n].
func chain(t *testing.T, k, m, n int) (a, b *Graph) {
	t.Helper()
	needRuntime(t)
	weights := func(rows, cols, seed int) []float32 {
		w := make([]float32, rows*cols)
		for i := range w {
			w[i] = float32((i*7+seed)%11)/8 - 0.6
		}
		return w
	}
	open := func(rows, cols, seed int, source string) *Graph {
		g, err := NewGraph(MatMulModel(rows, cols, weights(rows, cols, seed)), source, SessionOptions{IntraOpThreads: 1},
			[]IOSpec{{Name: "a", Shape: []int64{-1, int64(rows)}}}, []IOSpec{{Name: "c", Shape: []int64{-1, int64(cols)}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	return open(k, m, 1, "first"), open(m, n, 5, "second")
}

// A graph's output bound as the next graph's input gives, bit for bit, what copying it through
// Go gives; it is handed over as the value ONNX Runtime made (a handoff, not an upload) and
// only the last graph's output is read into Go. A later run of the first graph makes fresh
// outputs: the value the second graph holds is not overwritten.
func TestBoundChainMatchesCopies(t *testing.T) {
	const batch, k, m, n = 3, 5, 7, 4
	a, b := chain(t, k, m, n)
	x := make([]float32, batch*k)
	for i := range x {
		x[i] = float32(i%9)*0.37 - 1.1
	}
	mid, want := make([]float32, batch*m), make([]float32, batch*n)
	if err := a.RunInto(batch, mid, x); err != nil {
		t.Fatal(err)
	}
	if err := b.RunInto(batch, want, mid); err != nil {
		t.Fatal(err)
	}

	ba, err := a.Bind(true) // a's output stays on the device
	if err != nil {
		t.Fatal(err)
	}
	defer ba.Close()
	bb, err := b.Bind() // b's output comes back to CPU memory
	if err != nil {
		t.Fatal(err)
	}
	defer bb.Close()
	before := ReadBindingStats()
	if err := ba.SetInput(0, []int64{batch, k}, x); err != nil {
		t.Fatal(err)
	}
	if err := ba.Run(); err != nil {
		t.Fatal(err)
	}
	handed := ba.Output(0)
	if err := bb.SetValue(0, handed); err != nil {
		t.Fatal(err)
	}
	// a second run of the first graph on other inputs must leave the bound value as it was
	other := make([]float32, len(x))
	if err := ba.SetInput(0, []int64{batch, k}, other); err != nil {
		t.Fatal(err)
	}
	if err := ba.Run(); err != nil {
		t.Fatal(err)
	}
	if err := bb.Run(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, batch*n)
	if err := bb.Output(0).Read(got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bound chain: c[%d] = %v, through Go %v (want bit-identical)", i, got[i], want[i])
		}
	}
	d := ReadBindingStats()
	if up, hand, reads, runs := d.Uploads-before.Uploads, d.Handoffs-before.Handoffs, d.Reads-before.Reads, d.Runs-before.Runs; up != 2 || hand != 1 || reads != 1 || runs != 3 {
		t.Errorf("bound chain moved %d uploads, %d handoffs, %d reads in %d runs; want 2 uploads (the first graph's inputs), 1 handoff, 1 read, 3 runs", up, hand, reads, runs)
	}
	if handed.released != true {
		t.Error("the first graph's earlier output was not released by its next run")
	}
}

// Bound inputs stay bound across runs: a graph run again without rebinding sees the same
// input, so a slice bound once (the head's z) serves every step.
func TestBoundInputServesRuns(t *testing.T) {
	const batch, k, m = 2, 3, 4
	a, _ := chain(t, k, m, 1)
	x := []float32{1, 2, 3, -1, 0.5, 0.25}
	want := make([]float32, batch*m)
	if err := a.RunInto(batch, want, x); err != nil {
		t.Fatal(err)
	}
	ba, err := a.Bind()
	if err != nil {
		t.Fatal(err)
	}
	defer ba.Close()
	if err := ba.SetInput(0, []int64{batch, k}, x); err != nil {
		t.Fatal(err)
	}
	for run := range 3 {
		if err := ba.Run(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, batch*m)
		if err := ba.Output(0).Read(got); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("run %d: c[%d] = %v, want %v", run, i, got[i], want[i])
			}
		}
	}
}

// The graph's Close releases a binding still open and waits for a run in progress; the
// binding then refuses work, and its own Close is harmless (run with -race).
func TestGraphCloseReleasesBindings(t *testing.T) {
	a, _ := chain(t, 3, 4, 1)
	ba, err := a.Bind()
	if err != nil {
		t.Fatal(err)
	}
	if err := ba.SetInput(0, []int64{1, 3}, []float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		var err error
		for i := 0; i < 50 && err == nil; i++ {
			err = ba.Run()
		}
		done <- err
	}()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil && !strings.Contains(err.Error(), "after Close") {
		t.Errorf("a run racing the graph's Close failed with %v, want success or a used-after-Close error", err)
	}
	if err := ba.Run(); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("run after the graph's Close: %v, want a used-after-Close error", err)
	}
	if err := ba.Close(); err != nil {
		t.Error(err)
	}
}
