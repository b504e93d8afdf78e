package onnxrt

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"testing"
	"unsafe"
)

// mixedModel has a float64 input x [n, 3] and a float32 input y [s, n, 3], and two outputs
// over both: p = x * double(y) (float64) and q = y + float(x) (float32), both [s, n, 3]. Both
// element types and both dynamic axes go through a fixed-address run.
func mixedModel() []byte {
	node := func(op string, ins []string, out string, to int) []byte {
		if to != 0 { // Cast's "to"
			return nodeWith(op, ins, []string{out}, intAttr("to", int64(to)))
		}
		return nodeOf(op, ins, out)
	}
	value := func(name string, typ int, dims ...string) []byte {
		return msg(func(b []byte) []byte {
			shape := msg(func(s []byte) []byte {
				for _, d := range dims {
					if d == "3" {
						s = bytesField(s, 1, varintField(nil, 1, 3))
					} else {
						s = bytesField(s, 1, bytesField(nil, 2, []byte(d)))
					}
				}
				return s
			})
			tensor := bytesField(varintField(nil, 1, uint64(typ)), 2, shape)
			return bytesField(bytesField(b, 1, []byte(name)), 2, bytesField(nil, 1, tensor))
		})
	}
	graph := msg(func(b []byte) []byte {
		b = bytesField(b, 1, node("Cast", []string{"y"}, "yd", elemDouble))
		b = bytesField(b, 1, node("Mul", []string{"x", "yd"}, "p", 0))
		b = bytesField(b, 1, node("Cast", []string{"x"}, "xf", elemFloat))
		b = bytesField(b, 1, node("Add", []string{"y", "xf"}, "q", 0))
		b = bytesField(b, 2, []byte("mixed"))
		b = bytesField(b, 11, value("x", elemDouble, "n", "3"))
		b = bytesField(b, 11, value("y", elemFloat, "s", "n", "3"))
		b = bytesField(b, 12, value("p", elemDouble, "s", "n", "3"))
		return bytesField(b, 12, value("q", elemFloat, "s", "n", "3"))
	})
	return modelOf(graph)
}

// openMixed opens mixedModel (the runtime loaded already).
func openMixed(t *testing.T, opt SessionOptions) *Graph {
	t.Helper()
	g, err := NewGraph(mixedModel(), "mixed", opt,
		[]IOSpec{{Name: "x", Float64: true, Shape: []int64{-1, 3}}, {Name: "y", Shape: []int64{-2, -1, 3}}},
		[]IOSpec{{Name: "p", Float64: true, Shape: []int64{-2, -1, 3}}, {Name: "q", Shape: []int64{-2, -1, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// mixedData fills x and y from seed: every run of a test gets other values, so an input not
// copied in or an output not copied out shows as the last run's numbers.
func mixedData(seed int64) func(in Tensors) error {
	return func(in Tensors) error {
		rng := rand.New(rand.NewSource(seed))
		for i := range in.F64(0) {
			in.F64(0)[i] = rng.NormFloat64()
		}
		for i := range in.F32(1) {
			in.F32(1)[i] = float32(rng.NormFloat64())
		}
		return nil
	}
}

func mixedOutputs(p, q *[]uint64) func(out Tensors) error {
	return func(out Tensors) error {
		*p, *q = (*p)[:0], (*q)[:0]
		for _, v := range out.F64(0) {
			*p = append(*p, math.Float64bits(v))
		}
		for _, v := range out.F32(1) {
			*q = append(*q, uint64(math.Float32bits(v)))
		}
		return nil
	}
}

// dataAddr is where a tensor's data lies.
func dataAddr(t *testing.T, v unsafe.Pointer) uintptr {
	t.Helper()
	data, _, _, err := tensorData(v)
	if err != nil {
		t.Fatal(err)
	}
	return uintptr(data)
}

// A fixed-address run gives, bit for bit, RunDims's outputs, run after run on new data, at
// two shapes side by side; after opening it allocates nothing, and the outputs ONNX Runtime
// reports bound after each run lie where the runner allocated them.
func TestFixedRunMatchesRunDims(t *testing.T) {
	needRuntime(t)
	g := openMixed(t, SessionOptions{IntraOpThreads: 1})
	shapes := []Dims{{2, 3, 1, 1}, {5, 1, 1, 1}}
	runners := make([]*FixedRun, len(shapes))
	for i, dims := range shapes {
		f, err := g.Fixed(dims)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		runners[i] = f
	}
	if a, b := runners[0].GraphID(), runners[1].GraphID(); a < 1 || b < 1 || a == b {
		t.Errorf("CUDA graph ids %d and %d, want two distinct ids from 1", a, b)
	}
	addrs := func(f *FixedRun) (fixed, bound []uintptr) {
		for _, v := range f.dev {
			fixed = append(fixed, dataAddr(t, v))
		}
		outs, err := boundOutputs(f.run, len(g.outputs))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range outs {
			bound = append(bound, dataAddr(t, v))
			releaseValue(v)
		}
		return fixed, bound
	}
	first := make([][]uintptr, len(runners))
	for i, f := range runners {
		first[i], _ = addrs(f)
	}
	allocs := ReadFixedStats().Allocs
	var wantP, wantQ, gotP, gotQ []uint64
	for run := int64(0); run < 4; run++ {
		for i, dims := range shapes {
			seed := run*10 + int64(i)
			if err := g.RunDims(dims, func(in, _ Tensors) error { return mixedData(seed)(in) }, mixedOutputs(&wantP, &wantQ)); err != nil {
				t.Fatal(err)
			}
			if err := runners[i].Run(mixedData(seed), mixedOutputs(&gotP, &gotQ)); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("run %d shape %v", run, dims)
			if len(gotP) != 3*dims[0]*dims[1] || fmt.Sprint(gotP) != fmt.Sprint(wantP) || fmt.Sprint(gotQ) != fmt.Sprint(wantQ) {
				t.Errorf("%s: fixed-address outputs differ from RunDims's", name)
			}
			fixed, bound := addrs(runners[i])
			if fmt.Sprint(fixed) != fmt.Sprint(first[i]) {
				t.Errorf("%s: the fixed tensors moved: %x, at opening %x", name, fixed, first[i])
			}
			if fmt.Sprint(bound) != fmt.Sprint(fixed[len(g.inputs):]) {
				t.Errorf("%s: the run's outputs lie at %x, not in the bound tensors at %x", name, bound, fixed[len(g.inputs):])
			}
		}
	}
	if n := ReadFixedStats().Allocs - allocs; n != 0 {
		t.Errorf("%d device tensors allocated by runs, want 0", n)
	}
}

// Past the cap on captured shapes a runner gets no CUDA graph id (-1) and still runs right; ids
// are not handed out again when a runner closes.
func TestFixedRunPastCaptureCap(t *testing.T) {
	defer func(n int) { maxCapturedShapes = n }(maxCapturedShapes)
	maxCapturedShapes = 1
	needRuntime(t)
	g := openMixed(t, SessionOptions{IntraOpThreads: 1})
	a, err := g.Fixed(Dims{1, 2, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := g.Fixed(Dims{3, 2, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.GraphID() != 1 || b.GraphID() != -1 {
		t.Errorf("graph ids %d then %d, want 1 then -1 (past the cap, the first id not reused)", a.GraphID(), b.GraphID())
	}
	var wantP, wantQ, gotP, gotQ []uint64
	if err := g.RunDims(Dims{3, 2, 1, 1}, func(in, _ Tensors) error { return mixedData(9)(in) }, mixedOutputs(&wantP, &wantQ)); err != nil {
		t.Fatal(err)
	}
	if err := b.Run(mixedData(9), mixedOutputs(&gotP, &gotQ)); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gotP) != fmt.Sprint(wantP) || fmt.Sprint(gotQ) != fmt.Sprint(wantQ) {
		t.Error("an uncaptured runner's outputs differ from RunDims's")
	}
}

// The CPU accepts the CUDA graph option and ignores it: the session runs as any other, and
// closing the graph releases the runners still open.
func TestCUDAGraphOptionOnCPU(t *testing.T) {
	needRuntime(t)
	g := openMixed(t, SessionOptions{IntraOpThreads: 1, CUDAGraph: true})
	var p, q []uint64
	if err := g.RunDims(Dims{2, 2, 1, 1}, func(in, _ Tensors) error { return mixedData(1)(in) }, mixedOutputs(&p, &q)); err != nil {
		t.Fatalf("a CPU session with CUDAGraph set: %v", err)
	}
	f, err := g.Fixed(Dims{2, 2, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if err := f.Run(mixedData(1), mixedOutputs(&p, &q)); err == nil {
		t.Error("a runner ran after its graph's Close")
	}
	f.Close()
}

// A session capturing CUDA graphs (g.capture, set here as a CUDA session with CUDAGraph sets it)
// refuses RunDims and Bind, whose runs name no graph id and would capture ONNX Runtime's
// default one, and runs through Fixed.
func TestCapturingGraphRunsOnlyFixed(t *testing.T) {
	needRuntime(t)
	g := openMixed(t, SessionOptions{IntraOpThreads: 1})
	g.capture = true
	var p, q []uint64
	if err := g.RunDims(Dims{2, 2, 1, 1}, func(in, _ Tensors) error { return mixedData(1)(in) }, mixedOutputs(&p, &q)); err == nil {
		t.Error("RunDims ran on a capturing session")
	}
	if b, err := g.Bind(); err == nil {
		b.Close()
		t.Error("Bind opened on a capturing session")
	}
	f, err := g.Fixed(Dims{2, 2, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Run(mixedData(1), mixedOutputs(&p, &q)); err != nil || len(p) != 12 {
		t.Errorf("a fixed-address run on a capturing session: %d outputs, %v", len(p), err)
	}
}

func TestHasControlFlow(t *testing.T) {
	loop := varintField(nil, 1, 8)
	loop = bytesField(loop, 7, bytesField(nil, 1, bytesField(nil, 4, []byte("Loop"))))
	for _, c := range []struct {
		name  string
		model []byte
		want  bool
	}{{"mixed", mixedModel(), false}, {"copy", copyModel([]IOSpec{{Name: "a", Shape: []int64{-1}}}), false}, {"loop", loop, true}} {
		got, err := HasControlFlow(c.model, "")
		if err != nil || got != c.want {
			t.Errorf("%s: HasControlFlow = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// On a GPU (MARSPEC_TEST_CUDA=1, MARSPEC_ORT_LIB the GPU build; run alone, as the process loads
// one ONNX Runtime): a session capturing CUDA graphs gives, through fixed-address runners at two
// shapes, the CPU's outputs bit for bit run after run on new data, past the runs ONNX Runtime
// takes before capturing, so replays read the fresh inputs and write where they are read back.
func TestFixedRunCUDA(t *testing.T) {
	if os.Getenv("MARSPEC_TEST_CUDA") != "1" {
		t.Skip("set MARSPEC_TEST_CUDA=1 (and MARSPEC_ORT_LIB to ONNX Runtime's GPU build) on a machine with a GPU")
	}
	cuda := Device{CUDA: true}
	if err := Prepare(os.Getenv("MARSPEC_ORT_LIB"), cuda); err != nil {
		t.Fatal(err)
	}
	cpu := openMixed(t, SessionOptions{IntraOpThreads: 1})
	gpu := openMixed(t, SessionOptions{Device: cuda, CUDAGraph: true})
	if err := gpu.RunDims(Dims{1, 1, 1, 1}, func(Tensors, Tensors) error { return nil }, func(Tensors) error { return nil }); err == nil {
		t.Error("a capturing session ran outside Fixed")
	}
	shapes := []Dims{{4, 3, 1, 1}, {7, 2, 1, 1}}
	var runners []*FixedRun
	for _, dims := range shapes {
		f, err := gpu.Fixed(dims)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		runners = append(runners, f)
	}
	var wantP, wantQ, gotP, gotQ []uint64
	for run := int64(0); run < 8; run++ {
		for i, dims := range shapes {
			seed := 100 + run*10 + int64(i)
			if err := cpu.RunDims(dims, func(in, _ Tensors) error { return mixedData(seed)(in) }, mixedOutputs(&wantP, &wantQ)); err != nil {
				t.Fatal(err)
			}
			if err := runners[i].Run(mixedData(seed), mixedOutputs(&gotP, &gotQ)); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(gotP) != fmt.Sprint(wantP) || fmt.Sprint(gotQ) != fmt.Sprint(wantQ) {
				t.Errorf("run %d shape %v (CUDA graph %d): the GPU's outputs differ from the CPU's", run, dims, runners[i].GraphID())
			}
		}
	}
}
