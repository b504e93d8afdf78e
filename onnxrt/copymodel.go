package onnxrt

import "fmt"

// copyModel is an ONNX model that copies tensor i of specs from input "in<i>" to output
// "out<i>" through an Identity node, every axis dynamic. Run on a session of the device with
// the output bound to an existing tensor, it writes into that tensor's memory: FixedRun moves
// Go data into a fixed device buffer and back this way, since the C API of the ONNX Runtime
// builds marspec loads has no device copy that works with a provider appended to session
// options (fixedrun.go).
func copyModel(specs []IOSpec) []byte {
	valueInfo := func(name string, s IOSpec) []byte {
		dims := make([]any, len(s.Shape))
		for d := range dims {
			dims[d] = fmt.Sprintf("%s_%d", name, d) // dim_param: dynamic
		}
		return tensorValueInfo(name, elemType(s), dims...)
	}
	graph := msg(func(b []byte) []byte {
		for i := range specs {
			in, out := fmt.Sprintf("in%d", i), fmt.Sprintf("out%d", i)
			b = bytesField(b, 1, nodeOf("Identity", []string{in}, out))
		}
		b = bytesField(b, 2, []byte("copy"))
		for i, s := range specs {
			b = bytesField(b, 11, valueInfo(fmt.Sprintf("in%d", i), s))
		}
		for i, s := range specs {
			b = bytesField(b, 12, valueInfo(fmt.Sprintf("out%d", i), s))
		}
		return b
	})
	return modelOf(graph)
}

// elemType is a spec's ONNX element type (TensorProto.DataType, the C API's numbering too).
func elemType(s IOSpec) int {
	switch {
	case s.Int64:
		return elemInt64
	case s.Float64:
		return elemDouble
	}
	return elemFloat
}

// copySpecs are the copy model's inputs and outputs for specs, as NewGraph checks them.
func copySpecs(specs []IOSpec) (ins, outs []IOSpec) {
	for i, s := range specs {
		shape := make([]int64, len(s.Shape))
		for d := range shape {
			shape[d] = -1
		}
		ins = append(ins, IOSpec{Name: fmt.Sprintf("in%d", i), Int64: s.Int64, Float64: s.Float64, Shape: shape})
		outs = append(outs, IOSpec{Name: fmt.Sprintf("out%d", i), Int64: s.Int64, Float64: s.Float64, Shape: shape})
	}
	return ins, outs
}
