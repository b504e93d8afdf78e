package mar

import (
	"fmt"
	"sync"
	"sync/atomic"

	"marspec/onnxrt"
)

// HeadLoopFormat is the version of the fused reverse-diffusion graph (docs/model-pack.md).
const HeadLoopFormat = "marspec-head-loop/1"

// Columns of the fused graph's coef input, one row per sampling step taken: the posterior's
// coefficients and half its log-variance as lv0 + (v+1)*lv1.
const (
	coefSqrtRecipAcp = iota
	coefSqrtRecipM1Acp
	coefMean1
	coefMean2
	coefHalfLogVar0 // (posterior log-variance + 2 log temperature) / 2
	coefHalfLogVar1 // (log beta - posterior log-variance) / 4
	numCoefs
)

// HeadLoop runs head_loop.onnx: a token batch's whole reverse diffusion in one call, so the
// fixed cost of a call is paid once per batch instead of once per step.
type HeadLoop struct {
	*onnxrt.Graph
	dim, width int
	// steps and halves are fixed by an unrolled graph (0: any)
	steps, halves int
	fixed         *fixedLoops // non-nil: runs go through fixed-address runners (headcapture.go)
}

// LoopInputs are the fused graph's input tensors, filled in place. Rows: N tokens, S steps,
// G halves (2 under guidance: cond rows, then uncond rows).
type LoopInputs struct {
	XT    []float64 // [N, D]
	Noise []float64 // [S, N, D]; step i of the run (respaced index S-1-i); zero = no noise
	Z     []float32 // [G, N, W]
	CFG   []float64 // [N] guidance scale per row
	T     []float32 // [S] training timestep of each step
	Coef  []float64 // [S, numCoefs]
	Clip  []float64 // [2] x0 bounds (±Inf: no clipping)
}

// LoopOutputs are the fused graph's outputs, valid only during the read callback.
type LoopOutputs struct {
	X0         []float64 // [N, D]
	LastMean   []float64 // [N, D] mean of the last step
	HalfLogVar []float64 // [S, N, D] half the log-variance of every step
}

// NewHeadLoop opens head_loop.onnx and checks it against the pack.
func NewHeadLoop(data []byte, m *Manifest, opt onnxrt.SessionOptions, source string) (*HeadLoop, error) {
	return newHeadLoop(data, "", m, opt, source)
}

// newHeadLoop opens the graph from file when it is set.
func newHeadLoop(data []byte, file string, m *Manifest, opt onnxrt.SessionOptions, source string) (*HeadLoop, error) {
	return newHeadLoopFixed(data, file, m, opt, source, 0, 0)
}

// newHeadLoopFixed opens a fused graph whose step count and halves are fixed (an unrolled
// graph, UnrolledLoop), or free where they are 0.
func newHeadLoopFixed(data []byte, file string, m *Manifest, opt onnxrt.SessionOptions, source string, steps, halves int) (*HeadLoop, error) {
	D, W := int64(m.TokenDim), int64(m.Width)
	S, G := int64(-2), int64(-3)
	if steps > 0 {
		S, G = int64(steps), int64(halves)
	}
	opt, fixed, err := captureOptions(opt, data, file, source)
	if err != nil {
		return nil, err
	}
	f64 := func(name string, shape ...int64) onnxrt.IOSpec {
		return onnxrt.IOSpec{Name: name, Float64: true, Shape: shape}
	}
	g, err := openGraph(data, file, source, opt,
		[]onnxrt.IOSpec{f64("x_T", -1, D), f64("noise", S, -1, D), {Name: "z", Shape: []int64{G, -1, W}},
			f64("cfg", -1, 1), {Name: "t", Shape: []int64{S}}, f64("coef", S, numCoefs), f64("clip", 2)},
		[]onnxrt.IOSpec{f64("x0", -1, D), f64("last_mean", -1, D), f64("half_log_var", S, -1, D)})
	if err != nil {
		return nil, err
	}
	return &HeadLoop{Graph: g, dim: int(D), width: int(W), steps: steps, halves: halves, fixed: fixed}, nil
}

// RunLoop samples n tokens over steps steps (halves 2 under guidance): fill writes the
// inputs, read takes the outputs.
func (h *HeadLoop) RunLoop(n, steps, halves int, fill func(LoopInputs), read func(LoopOutputs)) error {
	if halves != 1 && halves != 2 {
		return fmt.Errorf("%s: %d halves, want 1 or 2", h.Source(), halves)
	}
	if h.steps > 0 && (steps != h.steps || halves != h.halves) {
		return fmt.Errorf("%s: unrolled for %d steps and %d halves, called with %d and %d", h.Source(), h.steps, h.halves, steps, halves)
	}
	if h.fixed != nil {
		return h.fixed.run(h, n, steps, halves, fill, read)
	}
	return h.RunDims(onnxrt.Dims{n, steps, halves, 1}, func(in, _ onnxrt.Tensors) error {
		fill(loopInputs(in))
		return nil
	}, func(out onnxrt.Tensors) error {
		read(loopOutputs(out))
		return nil
	})
}

// loopInputs and loopOutputs name the fused graph's tensors, in its input and output order.
func loopInputs(in onnxrt.Tensors) LoopInputs {
	return LoopInputs{XT: in.F64(0), Noise: in.F64(1), Z: in.F32(2), CFG: in.F64(3), T: in.F32(4), Coef: in.F64(5), Clip: in.F64(6)}
}

func loopOutputs(out onnxrt.Tensors) LoopOutputs {
	return LoopOutputs{X0: out.F64(0), LastMean: out.F64(1), HalfLogVar: out.F64(2)}
}

// LoopRunner runs a whole reverse diffusion in one call (HeadLoop, or a wrapper that times it).
type LoopRunner interface {
	RunLoop(n, steps, halves int, fill func(LoopInputs), read func(LoopOutputs)) error
}

// LoopHead is a head that may also offer the fused reverse diffusion.
type LoopHead interface {
	Head
	HeadLoop() LoopRunner // nil when the pack has none
}

// HeadLoop is the fused graph when sampling should use it, or nil.
func (h *ONNXHead) HeadLoop() LoopRunner {
	g := h.loop.ifOpened()
	if !h.useLoop || g == nil {
		return nil // not a typed nil, which callers would take for a graph
	}
	return h.fused(g)
}

// fused is the rolled graph g with the unrolled ones sampling takes where they fit.
func (h *ONNXHead) fused(g *HeadLoop) LoopRunner {
	if h.dispatch == nil {
		return g
	}
	return h.dispatch
}

// FusedLoop is the pack's fused graph whether or not sampling uses it (bench --profile and
// --parts --fused-head time it), or nil when the pack has none. Where sampling does not use
// it (the CPU) it is opened here, on first use: a MAR-B head's weights are 143 MB, which a
// session would hold, and read, for nothing.
func (h *ONNXHead) FusedLoop() (LoopRunner, error) {
	if h.loop == nil {
		return nil, nil
	}
	g, err := h.loop.get()
	if err != nil || g == nil { // g is nil when Close came first
		return nil, err
	}
	return h.fused(g), nil
}

// lazyLoop is a fused head graph (head_loop.onnx, or one unrolled session) opened on first use.
type lazyLoop struct {
	open   func() (*HeadLoop, error)
	once   sync.Once
	g      *HeadLoop
	err    error
	opened atomic.Bool // g is set
}

func (l *lazyLoop) get() (*HeadLoop, error) {
	l.once.Do(func() {
		if l.g, l.err = l.open(); l.err == nil {
			l.opened.Store(true)
		}
	})
	return l.g, l.err
}

// ifOpened is the graph if it has opened, else nil (also for a nil l); it opens nothing.
func (l *lazyLoop) ifOpened() *HeadLoop {
	if l == nil || !l.opened.Load() {
		return nil
	}
	return l.g
}

func (l *lazyLoop) close() error {
	l.once.Do(func() {}) // after Close nothing opens
	if l.g != nil {
		return l.g.Close()
	}
	return nil
}

// headLoopWanted decides whether sampling uses a pack's fused reverse diffusion. Measured on
// the CPU (docs/BENCHMARKS.md, bench --profile), ONNX Runtime's Loop costs more per iteration
// than a separate call per step costs in fixed overhead: the fused graph was 0.80x at batch 1
// and 0.99-1.06x at batch 32, so the CPU keeps the per-step path. On CUDA, where each step's
// call also pays kernel launches and copies, it is used. MARSPEC_HEAD_LOOP=on or off overrides
// either choice (the tokens are the same either way, TestFusedMatchesPerStep).
func headLoopWanted(dev onnxrt.Device) bool {
	return onCUDAUnless("MARSPEC_HEAD_LOOP", dev)
}
