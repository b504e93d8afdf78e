package onnxrt

import "fmt"

// copyModel is an ONNX model that copies tensor i of specs from input "in<i>" to output
// "out<i>" through an Identity node, every axis dynamic. Run on a session of the device with
// the output bound to an existing tensor, it writes into that tensor's memory: FixedRun moves
// Go data into a fixed device buffer and back this way, since the C API of the ONNX Runtime
// builds marspec loads has no device copy that works with a provider appended to session
// options (fixedrun.go).
func copyModel(specs []IOSpec) []byte {
	ins, outs := copySpecs(specs)
	graph := msg(func(b []byte) []byte {
		for i := range specs {
			b = bytesField(b, 1, nodeOf("Identity", []string{ins[i].Name}, outs[i].Name))
		}
		b = bytesField(b, 2, []byte("copy"))
		return valueInfos(b, ins, outs)
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
		shape := dynamic(len(s.Shape))
		ins = append(ins, IOSpec{Name: fmt.Sprintf("in%d", i), Int64: s.Int64, Float64: s.Float64, Shape: shape})
		outs = append(outs, IOSpec{Name: fmt.Sprintf("out%d", i), Int64: s.Int64, Float64: s.Float64, Shape: shape})
	}
	return ins, outs
}
