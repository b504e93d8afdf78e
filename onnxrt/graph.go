package onnxrt

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// Graph is one ONNX session with tensors cached per batch size, so repeated calls at a
// size allocate nothing. Safe for concurrent use, and concurrent calls run side by side (ONNX
// Runtime's Run is safe on one session): each call takes a set of tensors of its size that no
// other call holds, so engines stepped in parallel (the scheduler's lanes) share the weights
// without waiting on each other. Inputs and outputs are float32 or int64 tensors whose first
// axis may be the batch (-1 in IOSpec).
type Graph struct {
	// open is held for reading by every call and for writing by Close, which so waits for the
	// calls in progress
	open    sync.RWMutex
	mu      sync.Mutex // guards free and keep
	source  string
	session *ort.DynamicAdvancedSession
	inputs  []IOSpec
	outputs []IOSpec
	free    map[Dims][]*boundTensors // tensors no call holds, per size
	// keep is how many distinct sizes keep their tensors before all are dropped (SetKeep)
	keep int
	// device is where the session runs (IO bindings place outputs there)
	device Device
	// bindings are the IO bindings open on the session, released by Close (g.mu)
	bindings map[*Binding]struct{}
	// capture: the session captures CUDA graphs, so it runs only through Fixed (fixedrun.go)
	capture bool
	// fixed are the fixed-address runners open on the session, released by Close; graphIDs
	// counts the CUDA graph ids they were given; copyUp and copyDown copy their data in and
	// out (g.mu)
	fixed            map[*FixedRun]struct{}
	graphIDs         int
	copyUp, copyDown *Graph
	// taken are the outputs callers took from bindings (Binding.Take), released by Close if
	// their owner has not (g.mu)
	taken map[*Value]struct{}
}

// spareSets is how many unused tensor sets of one size a graph keeps: one per call that ran
// at the same time, which the scheduler's lanes bound.
const spareSets = 8

// IOSpec is a graph input or output: its name, element type (float32 unless Int64 or
// Float64) and shape. Negative sizes are dynamic axes: -1 is the batch, -2 and -3 the further
// sizes a RunDims call gives (e.g. steps and halves of the fused head).
type IOSpec struct {
	Name    string
	Int64   bool
	Shape   []int64
	Float64 bool
}

// at is the spec's shape with its dynamic axes given by dims.
func (s IOSpec) at(dims Dims) []int64 {
	shape := make([]int64, len(s.Shape))
	for i, d := range s.Shape {
		shape[i] = d
		if d < 0 {
			shape[i] = int64(dims[-d-1])
		}
	}
	return shape
}

// Dims gives the sizes of a call's dynamic axes: Dims[0] for -1 (the batch), Dims[1] for -2,
// Dims[2] for -3, Dims[3] for -4.
type Dims [4]int

type boundTensors struct {
	in, out []ort.Value
}

func (b *boundTensors) destroy() {
	for _, v := range b.in {
		v.Destroy()
	}
	for _, v := range b.out {
		v.Destroy()
	}
}

// NewGraph opens an ONNX model and checks its inputs and outputs against the expected ones;
// errors name source (the file) and the mismatch.
func NewGraph(data []byte, source string, opt SessionOptions, inputs, outputs []IOSpec) (*Graph, error) {
	return newGraph(modelSource{data: data}, source, opt, inputs, outputs)
}

// NewGraphFile is NewGraph for a model file on disk, for graphs over protobuf's 2 GB limit
// whose weights live in a file beside them (ONNX external data, e.g. MAR-H's transformer):
// ONNX Runtime finds that file relative to the model's path, which bytes do not have.
func NewGraphFile(path, source string, opt SessionOptions, inputs, outputs []IOSpec) (*Graph, error) {
	return newGraph(modelSource{path: path}, source, opt, inputs, outputs)
}

// modelSource is a model as bytes, or as a file path when path is set.
type modelSource struct {
	data []byte
	path string
}

// io reads the model's inputs and outputs without opening a session.
func (m modelSource) io() (ins, outs []ort.InputOutputInfo, err error) {
	err = m.read(func(r io.ReaderAt, size int64) error {
		ins, outs, err = modelIO(r, size)
		return err
	})
	return ins, outs, err
}

// read hands the model's protobuf, its bytes or its open file, to fn.
func (m modelSource) read(fn func(r io.ReaderAt, size int64) error) error {
	if m.path == "" {
		return fn(bytes.NewReader(m.data), int64(len(m.data)))
	}
	f, err := os.Open(m.path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return fn(f, st.Size())
}

func newGraph(model modelSource, source string, opt SessionOptions, inputs, outputs []IOSpec) (*Graph, error) {
	ins, outs, err := model.io()
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable ONNX model: %v", source, oneLine(err))
	}
	if err := checkIO(source, "input", ins, inputs); err != nil {
		return nil, err
	}
	if err := checkIO(source, "output", outs, outputs); err != nil {
		return nil, err
	}
	so, err := newSessionOptions(opt)
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	names := func(specs []IOSpec) []string {
		n := make([]string, len(specs))
		for i, s := range specs {
			n[i] = s.Name
		}
		return n
	}
	var sess *ort.DynamicAdvancedSession
	if model.path != "" {
		sess, err = ort.NewDynamicAdvancedSession(model.path, names(inputs), names(outputs), so)
	} else {
		sess, err = ort.NewDynamicAdvancedSessionWithONNXData(model.data, names(inputs), names(outputs), so)
	}
	if err != nil {
		if opt.Device.CUDA { // e.g. no GPU visible, or cuDNN missing: found only when a session starts
			return nil, fmt.Errorf("%s: cannot create a session on %s: %v; see docs/gpu.md, or use --device cpu", source, opt.Device, oneLine(err))
		}
		return nil, fmt.Errorf("%s: cannot create session: %v", source, oneLine(err))
	}
	return &Graph{source: source, session: sess, inputs: inputs, outputs: outputs, free: map[Dims][]*boundTensors{},
		device: opt.Device, bindings: map[*Binding]struct{}{}, capture: opt.CUDAGraph && opt.Device.CUDA, fixed: map[*FixedRun]struct{}{},
		taken: map[*Value]struct{}{}}, nil
}

func checkIO(source, kind string, got []ort.InputOutputInfo, want []IOSpec) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: has %d %ss, want %d (%s)", source, len(got), kind, len(want), specNames(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name {
			return fmt.Errorf("%s: %s %d is %q, want %q", source, kind, i, g.Name, w.Name)
		}
		wantType := ort.TensorElementDataType(ort.TensorElementDataTypeFloat)
		switch {
		case w.Int64:
			wantType = ort.TensorElementDataType(ort.TensorElementDataTypeInt64)
		case w.Float64:
			wantType = ort.TensorElementDataType(ort.TensorElementDataTypeDouble)
		}
		if g.DataType != wantType {
			return fmt.Errorf("%s: %s %q has type %v, want %v", source, kind, w.Name, g.DataType, wantType)
		}
		if len(g.Dimensions) != len(w.Shape) {
			return fmt.Errorf("%s: %s %q has rank %d, want %d", source, kind, w.Name, len(g.Dimensions), len(w.Shape))
		}
		for d, size := range w.Shape {
			if size > 0 && g.Dimensions[d] > 0 && g.Dimensions[d] != size {
				return fmt.Errorf("%s: %s %q has shape %v, want %v (-1 = batch)", source, kind, w.Name, g.Dimensions, w.Shape)
			}
		}
	}
	return nil
}

func specNames(specs []IOSpec) string {
	s := ""
	for i, sp := range specs {
		if i > 0 {
			s += ", "
		}
		s += sp.Name
	}
	return s
}

// take hands a call a set of tensors of these sizes that no other call holds, made when none
// is free (g.open held for reading).
func (g *Graph) take(dims Dims) (*boundTensors, error) {
	g.mu.Lock()
	if sets := g.free[dims]; len(sets) > 0 {
		b := sets[len(sets)-1]
		g.free[dims] = sets[:len(sets)-1]
		g.mu.Unlock()
		return b, nil
	}
	g.mu.Unlock()
	make1 := func(s IOSpec) (ort.Value, error) {
		shape := s.at(dims)
		switch {
		case s.Int64:
			return ort.NewEmptyTensor[int64](ort.NewShape(shape...))
		case s.Float64:
			return ort.NewEmptyTensor[float64](ort.NewShape(shape...))
		}
		return ort.NewEmptyTensor[float32](ort.NewShape(shape...))
	}
	b := &boundTensors{}
	for i, s := range append(append([]IOSpec{}, g.inputs...), g.outputs...) {
		v, err := make1(s)
		if err != nil {
			b.destroy()
			return nil, err
		}
		if i < len(g.inputs) {
			b.in = append(b.in, v)
		} else {
			b.out = append(b.out, v)
		}
	}
	return b, nil
}

// give returns a call's tensors for the next call of their size. Many distinct sizes drop
// every free set first, so memory stays bounded (SetKeep).
func (g *Graph) give(dims Dims, b *boundTensors) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sets, known := g.free[dims]
	if !known && len(g.free) >= g.keepSizes() {
		g.dropCache()
	}
	if len(sets) >= spareSets {
		b.destroy()
		return
	}
	g.free[dims] = append(sets, b)
}

// SetKeep bounds how many distinct sizes keep their tensors (default 16): a graph whose
// tensors are large at every size (the cached transformer's K/V) keeps fewer.
func (g *Graph) SetKeep(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keep = max(n, 1)
}

func (g *Graph) keepSizes() int {
	if g.keep == 0 {
		return 17
	}
	return g.keep
}

// dropCache destroys the free tensor sets (g.mu held); sets held by calls return later.
func (g *Graph) dropCache() {
	for k, sets := range g.free {
		for _, b := range sets {
			b.destroy()
		}
		delete(g.free, k)
	}
}

// RunInto is Run for a graph whose first output is the only one wanted.
func (g *Graph) RunInto(batch int, out []float32, inputs ...any) error {
	return g.Run(batch, [][]float32{out}, inputs...)
}

// Run copies float32/int64 inputs in, runs the graph and copies the float32 outputs out
// (outs[i] for output i; nil skips it).
func (g *Graph) Run(batch int, outs [][]float32, inputs ...any) error {
	if len(inputs) != len(g.inputs) {
		return fmt.Errorf("%s: got %d inputs, want %d (%s)", g.source, len(inputs), len(g.inputs), specNames(g.inputs))
	}
	if len(outs) > len(g.outputs) {
		return fmt.Errorf("%s: got %d output buffers, the graph has %d outputs", g.source, len(outs), len(g.outputs))
	}
	return g.RunDims(Dims{batch, 1, 1, 1}, func(in, res Tensors) error {
		for i, data := range inputs {
			if err := fillTensor(in[i], data); err != nil {
				return fmt.Errorf("input %s: %v", g.inputs[i].Name, err)
			}
		}
		for i, out := range outs { // check before running, so a bad buffer costs no run
			if out == nil {
				continue
			}
			t, ok := res[i].(*ort.Tensor[float32])
			if !ok {
				return fmt.Errorf("output %s is not float32", g.outputs[i].Name)
			}
			if n := len(t.GetData()); len(out) < n {
				return fmt.Errorf("output %s buffer holds %d values, need %d", g.outputs[i].Name, len(out), n)
			}
		}
		return nil
	}, func(res Tensors) error {
		for i, out := range outs {
			if out != nil {
				copy(out, res[i].(*ort.Tensor[float32]).GetData())
			}
		}
		return nil
	})
}

// RunDims binds the cached tensors of these dynamic sizes, lets fill write the inputs in place
// (it sees the outputs too, to check them before a run), runs the graph and lets read take the
// outputs: no copies beyond the caller's own. Errors from fill or read get the source prefix.
func (g *Graph) RunDims(dims Dims, fill func(in, out Tensors) error, read func(out Tensors) error) error {
	g.open.RLock()
	defer g.open.RUnlock()
	switch {
	case g.session == nil:
		return fmt.Errorf("%s: used after Close", g.source)
	case dims[0] < 1:
		return fmt.Errorf("%s: batch size %d, want at least 1", g.source, dims[0])
	case dims[1] < 1 || dims[2] < 1 || dims[3] < 1:
		return fmt.Errorf("%s: dynamic sizes %v, want at least 1", g.source, dims)
	case g.capture: // a run naming no CUDA graph would capture ONNX Runtime's default one
		return fmt.Errorf("%s: opened for CUDA graph capture, it runs only through Fixed", g.source)
	}
	b, err := g.take(dims)
	if err != nil {
		return fmt.Errorf("%s: %v", g.source, err)
	}
	defer g.give(dims, b)
	if err := fill(Tensors(b.in), Tensors(b.out)); err != nil {
		return fmt.Errorf("%s: %v", g.source, err)
	}
	if err := g.session.Run(b.in, b.out); err != nil {
		return fmt.Errorf("%s: run failed: %v", g.source, oneLine(err))
	}
	if err := read(Tensors(b.out)); err != nil {
		return fmt.Errorf("%s: %v", g.source, err)
	}
	return nil
}

// fillTensor copies a caller's buffer into a cached tensor. Buffers may be longer than the tensor
// (callers reuse buffers sized for their largest batch) but not shorter.
func fillTensor(dst ort.Value, src any) error {
	switch data := src.(type) {
	case []float32:
		if t, ok := dst.(*ort.Tensor[float32]); ok {
			return copyIn(t.GetData(), data)
		}
	case []int64:
		if t, ok := dst.(*ort.Tensor[int64]); ok {
			return copyIn(t.GetData(), data)
		}
	}
	return fmt.Errorf("got %T, which does not match the graph's element type", src)
}

func copyIn[T float32 | int64](dst, src []T) error {
	if len(src) < len(dst) {
		return fmt.Errorf("has %d values, want %d", len(src), len(dst))
	}
	copy(dst, src)
	return nil
}

// Source names the graph in errors (its file).
func (g *Graph) Source() string { return g.source }

// Close releases the session and its cached tensors.
func (g *Graph) Close() error {
	g.open.Lock()
	defer g.open.Unlock()
	if g.session == nil { // already closed
		return nil
	}
	g.mu.Lock()
	g.dropCache()
	open := make([]*Binding, 0, len(g.bindings))
	for b := range g.bindings {
		open = append(open, b)
	}
	clear(g.bindings)
	g.releaseTaken()
	g.mu.Unlock()
	for _, b := range open { // before the session they bind goes
		b.mu.Lock()
		b.release()
		b.mu.Unlock()
	}
	g.closeFixed()
	err := g.session.Destroy()
	g.session = nil
	return err
}

// Tensors are a graph's bound inputs or outputs in graph order, as RunDims hands them to its
// callbacks; the slices are the tensors' own memory, valid only during the callback.
type Tensors []ort.Value

// F32 is tensor i's float32 data (it panics if the graph declared another type: a caller bug).
func (t Tensors) F32(i int) []float32 { return t[i].(*ort.Tensor[float32]).GetData() }

// F64 is tensor i's float64 data.
func (t Tensors) F64(i int) []float64 { return t[i].(*ort.Tensor[float64]).GetData() }

// I64 is tensor i's int64 data.
func (t Tensors) I64(i int) []int64 { return t[i].(*ort.Tensor[int64]).GetData() }

// CachedSizes is how many distinct dynamic sizes hold cached tensors (tests check reuse).
func (g *Graph) CachedSizes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.free)
}
