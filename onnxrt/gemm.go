package onnxrt

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// GEMMResult is one measured matrix product: A [M,K] times a constant B [K,N], as a model's
// weights are multiplied.
type GEMMResult struct {
	M, K, N   int
	MsPerCall float64 // median over the calls
	GFLOPs    float64 // 2*M*K*N / time, in 1e9 per second
}

// MeasureGEMM times ONNX Runtime's MatMul on this device: the fp32 peak that a model's
// passes are compared with ("achieved GFLOP/s against the measured peak"). B is an
// initializer, so ONNX Runtime may pre-pack it exactly as it does model weights.
func MeasureGEMM(opt SessionOptions, m, k, n, reps int) (GEMMResult, error) {
	if m < 1 || k < 1 || n < 1 || reps < 1 {
		return GEMMResult{}, fmt.Errorf("gemm: sizes and reps must be positive (got %dx%dx%d, %d reps)", m, k, n, reps)
	}
	rng := rand.New(rand.NewPCG(uint64(k), uint64(n)))
	weights := make([]float32, k*n)
	for i := range weights {
		weights[i] = float32(rng.NormFloat64()) / float32(math.Sqrt(float64(k)))
	}
	g, err := NewGraph(MatMulModel(k, n, weights), fmt.Sprintf("gemm %dx%dx%d", m, k, n), opt,
		[]IOSpec{{Name: "a", Shape: []int64{-1, int64(k)}}}, []IOSpec{{Name: "c", Shape: []int64{-1, int64(n)}}})
	if err != nil {
		return GEMMResult{}, err
	}
	defer g.Close()
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	c := make([]float32, m*n)
	if err := g.RunInto(m, c, a); err != nil { // warm-up: pre-packing, arena
		return GEMMResult{}, err
	}
	times := make([]float64, reps)
	for i := range times {
		start := time.Now()
		if err := g.RunInto(m, c, a); err != nil {
			return GEMMResult{}, err
		}
		times[i] = time.Since(start).Seconds()
	}
	sort.Float64s(times)
	sec := times[len(times)/2]
	return GEMMResult{M: m, K: k, N: n, MsPerCall: sec * 1000, GFLOPs: 2 * float64(m) * float64(k) * float64(n) / sec / 1e9}, nil
}

// MatMulModel is an ONNX model (opset 13) of one MatMul: input a [batch, k] times the
// constant b [k, n] (row-major weights) gives c [batch, n]. Written field by field with
// protowire, so measuring the peak needs neither Python nor a file.
func MatMulModel(k, n int, weights []float32) []byte {
	raw := make([]byte, 4*len(weights))
	for i, w := range weights {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(w))
	}
	const float = 1 // TensorProto.DataType FLOAT
	tensor := msg(func(b []byte) []byte {
		b = protowire.AppendTag(b, 1, protowire.BytesType) // dims, packed
		b = protowire.AppendBytes(b, protowire.AppendVarint(protowire.AppendVarint(nil, uint64(k)), uint64(n)))
		b = varintField(b, 2, float)
		b = bytesField(b, 8, []byte("b"))
		return bytesField(b, 9, raw)
	})
	node := nodeOf("MatMul", []string{"a", "b"}, "c")
	graph := msg(func(b []byte) []byte {
		b = bytesField(b, 1, node)
		b = bytesField(b, 2, []byte("gemm"))
		b = bytesField(b, 5, tensor) // initializer
		b = bytesField(b, 11, tensorValueInfo("a", elemFloat, "batch", k))
		return bytesField(b, 12, tensorValueInfo("c", elemFloat, "batch", n))
	})
	return modelOf(graph)
}

func msg(build func([]byte) []byte) []byte { return build(nil) }

// nodeOf is a NodeProto of op from inputs to one output, without attributes.
func nodeOf(op string, inputs []string, output string) []byte {
	return nodeWith(op, inputs, []string{output})
}

// nodeWith is a NodeProto of op from inputs to outputs, with attributes.
func nodeWith(op string, inputs, outputs []string, attrs ...[]byte) []byte {
	return msg(func(b []byte) []byte {
		for _, in := range inputs {
			b = bytesField(b, 1, []byte(in))
		}
		for _, out := range outputs {
			b = bytesField(b, 2, []byte(out))
		}
		b = bytesField(b, 4, []byte(op))
		for _, a := range attrs {
			b = bytesField(b, 5, a)
		}
		return b
	})
}

// intAttr is an AttributeProto of one int.
func intAttr(name string, v int64) []byte {
	const attrInt = 2 // AttributeProto.AttributeType INT
	return msg(func(b []byte) []byte {
		b = bytesField(b, 1, []byte(name))
		b = varintField(b, 3, uint64(v))
		return varintField(b, 20, attrInt)
	})
}

// modelOf is a ModelProto (IR version 8, the default opset 13) holding graph.
func modelOf(graph []byte) []byte {
	opset := msg(func(b []byte) []byte { return varintField(bytesField(b, 1, nil), 2, 13) })
	model := varintField(nil, 1, 8) // ir_version 8
	model = bytesField(model, 7, graph)
	return bytesField(model, 8, opset)
}

func bytesField(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func varintField(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}
