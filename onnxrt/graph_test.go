package onnxrt

import (
	"sync"
	"testing"
	"time"
)

// Two calls on one graph must be inside a call at the same time: each call's fill waits until
// the other call has begun its own. Calls serialised per graph would never meet (the test
// fails after its timeout). Both must still get their own inputs' products back.
func TestCallsOnOneGraphOverlap(t *testing.T) {
	needRuntime(t)
	const k, n = 4, 3
	b := make([]float32, k*n)
	for i := range b {
		b[i] = float32(i%5) - 2
	}
	g, err := NewGraph(MatMulModel(k, n, b), "gemm", SessionOptions{IntraOpThreads: 1},
		[]IOSpec{{Name: "a", Shape: []int64{-1, k}}}, []IOSpec{{Name: "c", Shape: []int64{-1, n}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var met sync.WaitGroup
	met.Add(2)
	inside := make(chan struct{})
	go func() { met.Wait(); close(inside) }()
	results := make([][]float32, 2)
	errs := make([]error, 2)
	var calls sync.WaitGroup
	for c := range 2 {
		calls.Add(1)
		go func() {
			defer calls.Done()
			a := make([]float32, k)
			for i := range a {
				a[i] = float32(c*10 + i)
			}
			errs[c] = g.RunDims(Dims{1, 1, 1, 1}, func(in, out Tensors) error {
				copy(in.F32(0), a)
				met.Done()
				select {
				case <-inside:
				case <-time.After(10 * time.Second):
					t.Error("the other call never started while this one was inside: calls are serialised")
				}
				return nil
			}, func(out Tensors) error {
				results[c] = append([]float32(nil), out.F32(0)...)
				return nil
			})
		}()
	}
	calls.Wait()
	for c := range 2 {
		if errs[c] != nil {
			t.Fatal(errs[c])
		}
		for j := range n {
			want := float32(0)
			for i := range k {
				want += float32(c*10+i) * b[i*n+j]
			}
			if results[c][j] != want {
				t.Errorf("call %d: c[%d] = %g, want %g", c, j, results[c][j], want)
			}
		}
	}
	if n := g.CachedSizes(); n != 1 {
		t.Errorf("%d sizes cached after two calls at one size, want 1", n)
	}
}
