package onnxrt

// PickModel is an ONNX model (opset 13) of one GatherND: from "z" [batch, L, width] (float32)
// it takes the rows named by "at" [n, 2] (int64 pairs of batch row and position) into
// "picked" [n, width]. Run on the device where z was made, with z bound as another binding's
// output, it lets only the picked rows cross to the host (mar's ForwardPicked).
func PickModel(width int) []byte {
	graph := msg(func(b []byte) []byte {
		b = bytesField(b, 1, nodeOf("GatherND", []string{"z", "at"}, "picked"))
		b = bytesField(b, 2, []byte("pick"))
		b = bytesField(b, 11, tensorValueInfo("z", elemFloat, "batch", "positions", width))
		b = bytesField(b, 11, tensorValueInfo("at", elemInt64, "picks", 2))
		return bytesField(b, 12, tensorValueInfo("picked", elemFloat, "picks", width))
	})
	return modelOf(graph)
}

// PickSpecs are PickModel's inputs and outputs, as NewGraph checks them.
func PickSpecs(width int) (ins, outs []IOSpec) {
	w := int64(width)
	return []IOSpec{{Name: "z", Shape: []int64{-1, -2, w}}, {Name: "at", Int64: true, Shape: []int64{-3, 2}}},
		[]IOSpec{{Name: "picked", Shape: []int64{-3, w}}}
}

// tensorValueInfo is a ValueInfoProto of a tensor: an int dimension is a fixed size, a string a
// named dynamic one.
func tensorValueInfo(name string, elem int, dims ...any) []byte {
	shape := msg(func(b []byte) []byte {
		for _, d := range dims {
			dim := msg(func(b []byte) []byte {
				if s, ok := d.(string); ok {
					return bytesField(b, 2, []byte(s))
				}
				return varintField(b, 1, uint64(d.(int)))
			})
			b = bytesField(b, 1, dim)
		}
		return b
	})
	tensorType := msg(func(b []byte) []byte { return bytesField(varintField(b, 1, uint64(elem)), 2, shape) })
	typ := msg(func(b []byte) []byte { return bytesField(b, 1, tensorType) })
	return msg(func(b []byte) []byte { return bytesField(bytesField(b, 1, []byte(name)), 2, typ) })
}
