package mar

import (
	"errors"

	"marspec/onnxrt"
)

// Transformer maps known tokens and a class to one conditioning vector per position.
type Transformer interface {
	// Forward fills z [batch, L, W]. tokens [batch, L, D]; mask [batch, L] with 1 = unknown;
	// dropClass [batch] with 1 = "no class" (classifier-free guidance).
	Forward(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, z []float32) error
	SeqLen() int
	TokenDim() int
	Width() int
}

// Head is the diffusion head: (x_t, t, z) -> (epsilon, variance interpolation).
type Head interface {
	// Predict fills out [n, 2D] from xt [n, D], t [n] (training timesteps) and z [n, W].
	Predict(xt, t, z []float32, n int, out []float32) error
	TokenDim() int
	Width() int
}

// ONNXTransformer runs transformer.onnx.
type ONNXTransformer struct {
	*onnxrt.Graph
	seqLen, dim, width int
	pick               *rowPick
	picked             *pickedGraph // transformer_picked, nil when the pack has none (pickedgraph.go)
}

// NewONNXTransformer opens transformer.onnx and checks its inputs and outputs against the pack.
func NewONNXTransformer(data []byte, m *Manifest, opt onnxrt.SessionOptions, source string) (*ONNXTransformer, error) {
	return newONNXTransformer(data, "", m, opt, source)
}

// newONNXTransformer opens the graph from file when it is set (weights in external data).
func newONNXTransformer(data []byte, file string, m *Manifest, opt onnxrt.SessionOptions, source string) (*ONNXTransformer, error) {
	L, D, W := int64(m.SeqLen()), int64(m.TokenDim), int64(m.Width)
	outputs := []onnxrt.IOSpec{{Name: "z", Shape: []int64{-1, L, W}}}
	g, err := openGraph(data, file, source, opt, contextInputs(m), outputs)
	if err != nil {
		return nil, err
	}
	return &ONNXTransformer{Graph: g, seqLen: int(L), dim: int(D), width: int(W), pick: &rowPick{opt: opt}}, nil
}

// contextInputs are the inputs every transformer graph of a pack starts with (plain, cached,
// picked): tokens [B, L, D], mask [B, L], class_ids and drop_class [B].
func contextInputs(m *Manifest) []onnxrt.IOSpec {
	L, D := int64(m.SeqLen()), int64(m.TokenDim)
	return []onnxrt.IOSpec{{Name: "tokens", Shape: []int64{-1, L, D}}, {Name: "mask", Shape: []int64{-1, L}},
		{Name: "class_ids", Int64: true, Shape: []int64{-1}}, {Name: "drop_class", Shape: []int64{-1}}}
}

// Close releases the graph, the pick graph (picked.go) when it was opened, and the picked
// transformer (pickedgraph.go).
func (t *ONNXTransformer) Close() error {
	return errors.Join(t.Graph.Close(), t.pick.close(), t.picked.close())
}

func (t *ONNXTransformer) Forward(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, z []float32) error {
	return t.RunInto(batch, z, tokens, mask, classIDs, dropClass)
}
func (t *ONNXTransformer) SeqLen() int   { return t.seqLen }
func (t *ONNXTransformer) TokenDim() int { return t.dim }
func (t *ONNXTransformer) Width() int    { return t.width }

// ONNXHead runs head.onnx, and head_loop.onnx when the pack has it.
type ONNXHead struct {
	*onnxrt.Graph
	dim, width int
	// loop is head_loop.onnx (nil when the pack has none): opened with the head where sampling
	// takes it (useLoop, see headLoopWanted), else on the first FusedLoop
	loop    *lazyLoop
	useLoop bool
	// unrolled are the fused graphs for one step count and guidance each, taken where they
	// fit (nil unless unrolledWanted); dispatch chooses between them and loop
	unrolled *unrolledLoops
	dispatch *fusedLoops
	// useBinding says whether the per-step path keeps z bound (see ioBindingWanted).
	useBinding bool
}

// Close releases both graphs.
func (h *ONNXHead) Close() error {
	err := h.Graph.Close()
	if h.loop != nil {
		if lerr := h.loop.close(); err == nil { // a FusedLoop after Close opens nothing
			err = lerr
		}
	}
	if h.unrolled != nil {
		if lerr := h.unrolled.close(); err == nil {
			err = lerr
		}
	}
	return err
}

// NewONNXHead opens head.onnx and checks its inputs and outputs against the pack.
func NewONNXHead(data []byte, m *Manifest, opt onnxrt.SessionOptions, source string) (*ONNXHead, error) {
	return newONNXHead(data, "", m, opt, source)
}

// newONNXHead opens the graph from file when it is set.
func newONNXHead(data []byte, file string, m *Manifest, opt onnxrt.SessionOptions, source string) (*ONNXHead, error) {
	D, W := int64(m.TokenDim), int64(m.Width)
	g, err := openGraph(data, file, source, opt,
		[]onnxrt.IOSpec{{Name: "x_t", Shape: []int64{-1, D}}, {Name: "t", Shape: []int64{-1}}, {Name: "z", Shape: []int64{-1, W}}},
		[]onnxrt.IOSpec{{Name: "out", Shape: []int64{-1, 2 * D}}})
	if err != nil {
		return nil, err
	}
	return &ONNXHead{Graph: g, dim: int(D), width: int(W), useBinding: ioBindingWanted(opt.Device)}, nil
}

func (h *ONNXHead) Predict(xt, t, z []float32, n int, out []float32) error {
	return h.RunInto(n, out, xt, t, z)
}
func (h *ONNXHead) TokenDim() int { return h.dim }
func (h *ONNXHead) Width() int    { return h.width }

// openGraph opens a graph from its file when the pack names one (weights beside it, ONNX
// external data: the path is how ONNX Runtime finds them), else from its bytes.
func openGraph(data []byte, file, source string, opt onnxrt.SessionOptions, inputs, outputs []onnxrt.IOSpec) (*onnxrt.Graph, error) {
	if file != "" {
		return onnxrt.NewGraphFile(file, source, opt, inputs, outputs)
	}
	return onnxrt.NewGraph(data, source, opt, inputs, outputs)
}
