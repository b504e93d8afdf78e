package onnxrt

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// Binding runs a graph through ONNX Runtime's IO binding: inputs are bound once and stay bound
// across runs until replaced, and outputs are allocated by ONNX Runtime where the caller says,
// on the session's device (to hand to another graph's binding with no copy) or in CPU memory
// (to read back). On CUDA, binding a Go slice copies it to the GPU once, when it is bound, not
// at every run; an output kept on the device never reaches Go memory. On the CPU provider
// "the device" is CPU memory and the same calls run, so CPU tests exercise the GPU's code.
//
// A Binding is for one caller at a time; it holds the graph open (for reading) while it works,
// and the graph's Close releases bindings still open.
type Binding struct {
	g  *Graph
	mu sync.Mutex // guards ptr and outs against Close
	// ptr is the OrtIoBinding (nil once released)
	ptr unsafe.Pointer
	// onDevice[i]: output i stays on the session's device; else it comes back to CPU memory
	onDevice []bool
	device   unsafe.Pointer // memory info of the session's device
	host     unsafe.Pointer // memory info of CPU memory
	// goInputs are the Go-memory tensors bound per input (reused while the shape holds)
	goInputs []ort.Value
	outs     []*Value
}

// Value is a tensor ONNX Runtime allocated for a binding's output: on the session's device or in
// CPU memory. Bind it as another binding's input (no copy), or Read it into Go memory.
type Value struct {
	ptr      unsafe.Pointer
	onDevice bool // in the memory of a CUDA session's device: not readable from Go
	released bool
	// owner is the graph whose binding made a value taken with Take (nil otherwise)
	owner *Graph
}

// BindingStats counts, over the process, what bindings moved: Go slices bound as inputs
// (Uploads: each one copy to the device on CUDA), device values bound as inputs (Handoffs: no
// copy), outputs read into Go (Reads). Tests check that a path did not fall back to copies.
type BindingStats struct{ Uploads, Handoffs, Reads, Runs int64 }

var bindingCounts struct{ uploads, handoffs, reads, runs atomic.Int64 }

// ReadBindingStats returns the process's counts so far.
func ReadBindingStats() BindingStats {
	return BindingStats{bindingCounts.uploads.Load(), bindingCounts.handoffs.Load(), bindingCounts.reads.Load(), bindingCounts.runs.Load()}
}

// Bind opens an IO binding on the graph. onDevice[i] keeps output i on the session's device
// (missing entries: false, the output comes back to CPU memory). Close it when done.
func (g *Graph) Bind(onDevice ...bool) (*Binding, error) {
	g.open.RLock()
	defer g.open.RUnlock()
	if g.session == nil {
		return nil, fmt.Errorf("%s: used after Close", g.source)
	}
	if g.capture { // its runs name no CUDA graph: ONNX Runtime would capture its default one
		return nil, fmt.Errorf("%s: opened for CUDA graph capture, it runs only through Fixed", g.source)
	}
	if len(onDevice) > len(g.outputs) {
		return nil, fmt.Errorf("%s: %d output placements, the graph has %d outputs", g.source, len(onDevice), len(g.outputs))
	}
	if err := capi(); err != nil {
		return nil, fmt.Errorf("%s: IO binding: %v", g.source, err)
	}
	session, err := sessionPointer(g.session)
	if err != nil {
		return nil, fmt.Errorf("%s: IO binding: %v", g.source, err)
	}
	b := &Binding{g: g, onDevice: make([]bool, len(g.outputs)), goInputs: make([]ort.Value, len(g.inputs))}
	copy(b.onDevice, onDevice)
	if b.ptr, err = createBinding(session); err != nil {
		return nil, fmt.Errorf("%s: IO binding: %v", g.source, err)
	}
	if b.device, err = memoryInfo(g.device); err == nil {
		b.host, err = memoryInfo(CPU)
	}
	if err != nil {
		b.release()
		return nil, fmt.Errorf("%s: IO binding: %v", g.source, err)
	}
	g.mu.Lock()
	g.bindings[b] = struct{}{}
	g.mu.Unlock()
	return b, nil
}

// memoryInfo makes ONNX Runtime's description of a device's memory: "Cuda" with the GPU's
// number, or "Cpu".
func memoryInfo(d Device) (unsafe.Pointer, error) {
	if d.CUDA {
		return newMemoryInfo("Cuda", d.ID)
	}
	return newMemoryInfo("Cpu", 0)
}

// sessionPointer is the OrtSession under onnxruntime_go's session, which the binding keeps
// unexported; found by field name, so a later layout is refused rather than misread.
func sessionPointer(s *ort.DynamicAdvancedSession) (unsafe.Pointer, error) {
	inner := reflect.ValueOf(s).Elem().FieldByName("s")
	if inner.Kind() != reflect.Pointer || inner.IsNil() {
		return nil, fmt.Errorf("this onnxruntime_go version's DynamicAdvancedSession layout is unknown to marspec (onnxrt/iobinding.go)")
	}
	f := inner.Elem().FieldByName("ortSession")
	if f.Kind() != reflect.Pointer || f.IsNil() {
		return nil, fmt.Errorf("this onnxruntime_go version's AdvancedSession layout is unknown to marspec (onnxrt/iobinding.go)")
	}
	return f.UnsafePointer(), nil
}

// valuePointer is the OrtValue under an onnxruntime_go tensor.
func valuePointer(v ort.Value) (unsafe.Pointer, error) {
	f := reflect.ValueOf(v.GetInternals()).Elem().FieldByName("ortValue")
	if f.Kind() != reflect.Pointer || f.IsNil() {
		return nil, fmt.Errorf("this onnxruntime_go version's tensor layout is unknown to marspec (onnxrt/iobinding.go)")
	}
	return f.UnsafePointer(), nil
}

// checkInput checks the binding is usable and i is an input (b.mu held).
func (b *Binding) checkInput(i int) error {
	if b.ptr == nil {
		return fmt.Errorf("%s: binding used after Close", b.g.source)
	}
	if i < 0 || i >= len(b.g.inputs) {
		return fmt.Errorf("%s: input %d of %d", b.g.source, i, len(b.g.inputs))
	}
	return nil
}

// SetInput binds a float32 Go slice of this shape as input i (copied into a tensor the binding
// keeps; on CUDA, ONNX Runtime copies it to the GPU now, once, not at every run). A slice that
// changes must be bound again.
func (b *Binding) SetInput(i int, shape []int64, data []float32) error {
	return setGoInput(b, i, shape, data)
}

// SetInputInt64 is SetInput for an int64 input (class ids, indices).
func (b *Binding) SetInputInt64(i int, shape []int64, data []int64) error {
	return setGoInput(b, i, shape, data)
}

func setGoInput[T float32 | int64](b *Binding, i int, shape []int64, data []T) error {
	b.g.open.RLock()
	defer b.g.open.RUnlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkInput(i); err != nil {
		return err
	}
	in := b.g.inputs[i]
	var zero T
	if _, wantInt := any(zero).(int64); in.Float64 || in.Int64 != wantInt {
		return fmt.Errorf("%s: input %s is %s, bound as %T", b.g.source, in.Name, elemName(in), zero)
	}
	t, ok := b.goInputs[i].(*ort.Tensor[T])
	if !ok || !sameShape(t.GetShape(), shape) {
		if b.goInputs[i] != nil {
			b.goInputs[i].Destroy()
			b.goInputs[i] = nil
		}
		var err error
		if t, err = ort.NewEmptyTensor[T](ort.NewShape(shape...)); err != nil {
			return fmt.Errorf("%s: input %s: %v", b.g.source, in.Name, err)
		}
		b.goInputs[i] = t
	}
	if err := copyIn(t.GetData(), data); err != nil {
		return fmt.Errorf("%s: input %s %v", b.g.source, in.Name, err)
	}
	ptr, err := valuePointer(t)
	if err == nil {
		err = bindInput(b.ptr, in.Name, ptr)
	}
	if err != nil {
		return fmt.Errorf("%s: binding input %s: %v", b.g.source, in.Name, err)
	}
	bindingCounts.uploads.Add(1)
	return nil
}

// elemName names a spec's element type for messages.
func elemName(s IOSpec) string {
	switch {
	case s.Int64:
		return "int64"
	case s.Float64:
		return "float64"
	}
	return "float32"
}

func sameShape(a ort.Shape, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// SetValue binds v, another binding's output, as input i: ONNX Runtime reads it where it lies
// (on the device), with no copy. The binding holds its own reference to the tensor, so the
// binding that made v may release it (its next Run) while this one still reads it.
func (b *Binding) SetValue(i int, v *Value) error {
	b.g.open.RLock()
	defer b.g.open.RUnlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkInput(i); err != nil {
		return err
	}
	if v == nil || v.released {
		return fmt.Errorf("%s: input %s: the value was released", b.g.source, b.g.inputs[i].Name)
	}
	if err := bindInput(b.ptr, b.g.inputs[i].Name, v.ptr); err != nil {
		return fmt.Errorf("%s: binding input %s: %v", b.g.source, b.g.inputs[i].Name, err)
	}
	bindingCounts.handoffs.Add(1)
	return nil
}

// Run runs the graph on the bound inputs. Each run's outputs are fresh tensors (a value an
// earlier run handed out, perhaps bound into another graph, is not overwritten), placed as Bind
// said; Output gives them until the next Run or Close.
func (b *Binding) Run() error {
	b.g.open.RLock()
	defer b.g.open.RUnlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.g.session == nil || b.ptr == nil {
		return fmt.Errorf("%s: binding used after Close", b.g.source)
	}
	session, err := sessionPointer(b.g.session)
	if err != nil {
		return fmt.Errorf("%s: %v", b.g.source, err)
	}
	clearBoundOutputs(b.ptr)
	for i := range b.g.outputs {
		info := b.host
		if b.onDevice[i] {
			info = b.device
		}
		if err := bindOutputToDevice(b.ptr, b.g.outputs[i].Name, info); err != nil {
			return fmt.Errorf("%s: binding output %s: %v", b.g.source, b.g.outputs[i].Name, err)
		}
	}
	if err := runWithBinding(session, b.ptr, nil); err != nil {
		return fmt.Errorf("%s: run failed: %v", b.g.source, oneLine(err))
	}
	bindingCounts.runs.Add(1)
	b.releaseOutputs()
	ptrs, err := boundOutputs(b.ptr, len(b.g.outputs))
	if err != nil {
		return fmt.Errorf("%s: reading bound outputs: %v", b.g.source, err)
	}
	for i, p := range ptrs {
		b.outs = append(b.outs, &Value{ptr: p, onDevice: b.onDevice[i] && b.g.device.CUDA})
	}
	if len(ptrs) != len(b.g.outputs) {
		return fmt.Errorf("%s: the run gave %d outputs, want %d", b.g.source, len(ptrs), len(b.g.outputs))
	}
	return nil
}

// Output is output i of the last Run (nil before one). The binding releases it at the next
// Run or Close; a binding it was bound into keeps the tensor itself alive.
func (b *Binding) Output(i int) *Value {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i < 0 || i >= len(b.outs) {
		return nil
	}
	return b.outs[i]
}

// releaseOutputs releases the last run's outputs (b.mu held). Their tensors live on where
// another binding holds them as inputs (ONNX Runtime counts the references).
func (b *Binding) releaseOutputs() {
	for _, v := range b.outs {
		if v == nil { // taken
			continue
		}
		releaseValue(v.ptr)
		v.released = true
	}
	b.outs = b.outs[:0]
}

// Read copies a value in CPU memory into dst (float32 or float64 tensors; dst at least as long
// as the tensor). A value kept on a CUDA device is refused: bind the output to CPU memory to
// read it.
func (v *Value) Read(dst []float32) error {
	if v == nil || v.released {
		return fmt.Errorf("read of a released value")
	}
	if v.onDevice {
		return fmt.Errorf("read of a value in GPU memory: bind the output to CPU memory (Bind's onDevice false) to read it")
	}
	data, typ, n, err := tensorData(v.ptr)
	if err != nil {
		return err
	}
	if n > len(dst) {
		return fmt.Errorf("buffer holds %d values, need %d", len(dst), n)
	}
	switch typ {
	case elemFloat:
		copy(dst, unsafe.Slice((*float32)(data), n))
	case elemDouble:
		for i, x := range unsafe.Slice((*float64)(data), n) {
			dst[i] = float32(x)
		}
	default:
		return fmt.Errorf("read of a tensor of element type %d (float32 or float64 only)", typ)
	}
	bindingCounts.reads.Add(1)
	return nil
}

// Close releases the binding, its outputs and the Go tensors it bound. Safe to call twice, and
// after the graph's Close (which released it).
func (b *Binding) Close() error {
	b.mu.Lock()
	b.release()
	b.mu.Unlock()
	b.g.mu.Lock() // after b.mu is let go: the graph's Close takes them the other way round
	delete(b.g.bindings, b)
	b.g.mu.Unlock()
	return nil
}

// release frees everything the binding holds (b.mu held, or b not yet shared).
func (b *Binding) release() {
	b.releaseOutputs()
	if b.ptr != nil {
		releaseBinding(b.ptr)
		b.ptr = nil
	}
	for _, info := range []unsafe.Pointer{b.device, b.host} {
		if info != nil {
			releaseMemoryInfo(info)
		}
	}
	b.device, b.host = nil, nil
	for i, t := range b.goInputs {
		if t != nil {
			t.Destroy()
			b.goInputs[i] = nil
		}
	}
}
