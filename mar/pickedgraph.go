package mar

import (
	"fmt"
	"slices"
	"sync/atomic"

	"marspec/onnxrt"
)

// PickedSpec is the manifest's optional "picked" entry: transformer_picked.onnx, the
// transformer that makes z at chosen positions only (scripts/packs/picked_transformer.py).
type PickedSpec struct {
	File string `json:"file"`
}

func (s *PickedSpec) validate() error {
	if !isPackFileName(s.File) {
		return fmt.Errorf("picked file %q: want a file name in the pack folder ending in .onnx", s.File)
	}
	return nil
}

// pickedGraph is a pack's transformer_picked graph: transformer.onnx's inputs plus at [B, K]
// (int64 positions) in, z [B, K, W] out. Every decoder block but the last needs every position,
// since attention is bidirectional; the last one's queries, projection and MLP and the final
// norm run on the picked rows alone. The embedded target's 3 AR steps predict about 7, 18 and
// 24 of 49 positions, so that skips most of one block of six (docs/BENCHMARKS.md, "The last
// decoder block on the picked rows").
type pickedGraph struct {
	g       *onnxrt.Graph
	L, D, W int
}

// pickedPasses counts the passes run on picked transformers, process-wide (PickedPasses).
var pickedPasses atomic.Int64

// PickedPasses is how many passes ran on a pack's picked transformer in this process: tests
// check with it that a path picked, as onnxrt.ReadBindingStats counts the pick graph's handoffs.
func PickedPasses() int64 { return pickedPasses.Load() }

// openPickedGraph opens the picked transformer and checks its inputs and outputs against the
// pack; nil when the pack has none at its precision.
func openPickedGraph(data []byte, file string, m *Manifest, opt onnxrt.SessionOptions, source string) (*pickedGraph, error) {
	if data == nil && file == "" {
		return nil, nil
	}
	opt.CUDAGraph = false // K changes from call to call
	opt.FixedDims = nil
	L, D, W := m.SeqLen(), m.TokenDim, m.Width
	inputs := append(contextInputs(m), onnxrt.IOSpec{Name: "at", Int64: true, Shape: []int64{-1, -2}})
	outputs := []onnxrt.IOSpec{{Name: "z", Shape: []int64{-1, -2, int64(W)}}}
	g, err := openGraph(data, file, source, opt, inputs, outputs)
	if err != nil {
		return nil, err
	}
	return &pickedGraph{g: g, L: L, D: D, W: W}, nil
}

func (p *pickedGraph) close() error {
	if p == nil {
		return nil
	}
	return p.g.Close()
}

// forward fills z [len(at), W] with z at the (row, position) pairs at. The graph takes the
// same number K of positions in every row: K is the most any row picks, at least 2, and
// shorter rows repeat their first pick (a row that picks nothing names position 0). With one
// query row per image ONNX Runtime takes matrix-vector kernels whose sums round differently
// from the whole pass's (2.4e-7); from 2 on the rows are the whole pass's bit for bit here.
func (p *pickedGraph) forward(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, at [][2]int, z []float32) error {
	L, D, W := p.L, p.D, p.W
	if len(at) == 0 {
		return nil
	}
	count := make([]int, batch)
	for _, a := range at {
		count[a[0]]++
	}
	K := max(slices.Max(count), 2)
	slot := make([]int, len(at)) // where at[j]'s z lies in the output
	clear(count)
	for j, a := range at {
		slot[j] = a[0]*K + count[a[0]]
		count[a[0]]++
	}
	return p.g.RunDims(onnxrt.Dims{batch, K, 1, 1}, func(in, _ onnxrt.Tensors) error {
		copy(in.F32(0), tokens[:batch*L*D])
		copy(in.F32(1), mask[:batch*L])
		copy(in.I64(2), classIDs[:batch])
		copy(in.F32(3), dropClass[:batch])
		positions := in.I64(4)
		for j, a := range at {
			positions[slot[j]] = int64(a[1])
		}
		for r, c := range count {
			first := int64(0)
			if c > 0 {
				first = positions[r*K]
			}
			for k := c; k < K; k++ {
				positions[r*K+k] = first
			}
		}
		return nil
	}, func(out onnxrt.Tensors) error {
		pickedPasses.Add(1)
		picked := out.F32(0)
		for j, s := range slot {
			copy(z[j*W:(j+1)*W], picked[s*W:(s+1)*W])
		}
		return nil
	})
}
