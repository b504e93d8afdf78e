package mar

import (
	"marspec/onnxrt"
)

// BoundPredictor is a head with a run's conditioning z bound once: every sampling step binds
// only x_t and t. On CUDA z (width W per row, 48x a MAR-B token's 16 dims) so crosses to the
// GPU once per AR step instead of once per diffusion step.
type BoundPredictor interface {
	// Predict fills out [n, 2D] from xt [n, D] and t [n] against the bound z.
	Predict(xt, t, out []float32) error
	Close() error
}

// BindableHead is a head that can keep z bound across a run's steps (ONNXHead).
type BindableHead interface {
	// BindZ binds z [n, W] for the steps that follow; nil, nil when the head runs unbound
	// (then Predict copies z at every step, as before).
	BindZ(z []float32, n int) (BoundPredictor, error)
}

// ioBindingWanted decides whether the per-step head keeps z bound through ONNX Runtime's IO
// binding: on CUDA, where each unbound call copies z to the GPU; not on the CPU, where there
// is no copy to save. MARSPEC_IO_BINDING=on or off overrides either choice (the tokens are the
// same bit for bit, TestBoundHeadMatchesCopies), so CPU tests run the GPU's code.
func ioBindingWanted(dev onnxrt.Device) bool {
	return onCUDAUnless("MARSPEC_IO_BINDING", dev)
}

// BindZ binds z for a run's steps when IO binding is wanted (ioBindingWanted).
func (h *ONNXHead) BindZ(z []float32, n int) (BoundPredictor, error) {
	if !h.useBinding {
		return nil, nil
	}
	b, err := h.Graph.Bind() // the output comes back to CPU memory: the step arithmetic is in Go
	if err != nil {
		return nil, err
	}
	if err := b.SetInput(2, []int64{int64(n), int64(h.width)}, z[:n*h.width]); err != nil {
		b.Close()
		return nil, err
	}
	return &boundHead{b: b, n: n, dim: h.dim}, nil
}

type boundHead struct {
	b      *onnxrt.Binding
	n, dim int
}

func (p *boundHead) Predict(xt, t, out []float32) error {
	if err := p.b.SetInput(0, []int64{int64(p.n), int64(p.dim)}, xt); err != nil {
		return err
	}
	if err := p.b.SetInput(1, []int64{int64(p.n)}, t); err != nil {
		return err
	}
	if err := p.b.Run(); err != nil {
		return err
	}
	return p.b.Output(0).Read(out)
}

func (p *boundHead) Close() error { return p.b.Close() }
