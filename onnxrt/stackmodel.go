package onnxrt

import "fmt"

// The models here keep per-item tensors on the device (mar's K/V cache, one tensor set per
// image half): a call stacks the items' tensors into one batch, and the batch's new rows are
// scattered into place and cut back into items, so that nothing crosses to the host. Each
// works on groups of tensors (the cache's encoder K/V, encoder output and decoder K/V), one
// rank per group, float32, every axis dynamic; n is the number of items.

// StackModel is an ONNX model (opset 13) whose group g concatenates inputs "item<g>_<i>"
// (i < n, each [1, ...] of rank ranks[g]) on axis 0 into output "stack<g>", and gives it again
// without the last entry of axis slotAxes[g] as "trimmed<g>": items may carry a spare slot
// (where ScatterSplitModel's unwanted rows go) that the graph reading the stack must not see.
func StackModel(n int, ranks, slotAxes []int) []byte {
	ins, outs := StackSpecs(n, ranks)
	graph := msg(func(b []byte) []byte {
		for g := range ranks {
			names := make([]string, n)
			for i := range names {
				names[i] = ins[g*n+i].Name
			}
			stack, trimmed := outs[g].Name, outs[len(ranks)+g].Name
			b = bytesField(b, 1, nodeWith("Concat", names, []string{stack}, intAttr("axis", 0)))
			b = bytesField(b, 1, nodeOf("Slice", []string{stack, "zero", "minus_one", fmt.Sprintf("slot_axis%d", g)}, trimmed))
		}
		b = bytesField(b, 2, []byte("stack"))
		b = bytesField(b, 5, int64Initializer("zero", 0))
		b = bytesField(b, 5, int64Initializer("minus_one", -1))
		for g, axis := range slotAxes {
			b = bytesField(b, 5, int64Initializer(fmt.Sprintf("slot_axis%d", g), int64(axis)))
		}
		return valueInfos(b, ins, outs)
	})
	return modelOf(graph)
}

// StackSpecs are StackModel's inputs and outputs (the stacks, then the trimmed stacks), as
// NewGraph checks them.
func StackSpecs(n int, ranks []int) (ins, outs []IOSpec) {
	for g, r := range ranks {
		for i := 0; i < n; i++ {
			ins = append(ins, IOSpec{Name: fmt.Sprintf("item%d_%d", g, i), Shape: dynamic(r)})
		}
		outs = append(outs, IOSpec{Name: fmt.Sprintf("stack%d", g), Shape: dynamic(r)})
	}
	for g, r := range ranks {
		outs = append(outs, IOSpec{Name: fmt.Sprintf("trimmed%d", g), Shape: dynamic(r)})
	}
	return ins, outs
}

// int64Initializer is a TensorProto of int64 values, one axis.
func int64Initializer(name string, values ...int64) []byte {
	const int64Type = 7 // TensorProto.DataType INT64
	return msg(func(b []byte) []byte {
		b = varintField(b, 1, uint64(len(values))) // dims
		b = varintField(b, 2, int64Type)
		for _, v := range values {
			b = varintField(b, 7, uint64(v)) // int64_data
		}
		return bytesField(b, 8, []byte(name))
	})
}

// ScatterSplitModel is an ONNX model (opset 13) whose group g writes the rows "new<g>" into
// "data<g>" at the index tuples "at<g>" (ScatterND: at is int64 [..., rank-1], new is at's
// shape but the last axis and then the data's last axis: each tuple names one row of the last
// axis) and cuts the result on axis 0 into n outputs "out<g>_<i>", each [1, ...]. With fresh,
// the data are zeros of the shape "shape<g>" (int64 [rank]) instead: a new set of items.
// ScatterND leaves undefined which of two rows written to one place wins, so a caller points
// the rows it has no use for at a place nothing reads.
func ScatterSplitModel(n int, ranks []int, fresh bool) []byte {
	ins, outs := ScatterSplitSpecs(n, ranks, fresh)
	graph := msg(func(b []byte) []byte {
		for g := range ranks {
			data, at, rows := ins[3*g].Name, ins[3*g+1].Name, ins[3*g+2].Name
			if fresh {
				zeros := fmt.Sprintf("zeros%d", g)
				b = bytesField(b, 1, nodeOf("ConstantOfShape", []string{data}, zeros)) // float32 0 by default
				data = zeros
			}
			written := fmt.Sprintf("written%d", g)
			b = bytesField(b, 1, nodeOf("ScatterND", []string{data, at, rows}, written))
			names := make([]string, n)
			for i := range names {
				names[i] = outs[g*n+i].Name
			}
			b = bytesField(b, 1, nodeWith("Split", []string{written}, names)) // equal parts on axis 0
		}
		b = bytesField(b, 2, []byte("scatter_split"))
		return valueInfos(b, ins, outs)
	})
	return modelOf(graph)
}

// ScatterSplitSpecs are ScatterSplitModel's inputs (data or shape, at, new per group) and
// outputs (n per group), as NewGraph checks them.
func ScatterSplitSpecs(n int, ranks []int, fresh bool) (ins, outs []IOSpec) {
	for g, r := range ranks {
		data := IOSpec{Name: fmt.Sprintf("data%d", g), Shape: dynamic(r)}
		if fresh {
			data = IOSpec{Name: fmt.Sprintf("shape%d", g), Int64: true, Shape: []int64{int64(r)}}
		}
		at := IOSpec{Name: fmt.Sprintf("at%d", g), Int64: true, Shape: append(dynamic(r-1), int64(r-1))}
		ins = append(ins, data, at, IOSpec{Name: fmt.Sprintf("new%d", g), Shape: dynamic(r)})
		for i := 0; i < n; i++ {
			outs = append(outs, IOSpec{Name: fmt.Sprintf("out%d_%d", g, i), Shape: dynamic(r)})
		}
	}
	return ins, outs
}

// dynamic is a shape of rank r whose every axis is dynamic.
func dynamic(r int) []int64 {
	shape := make([]int64, r)
	for i := range shape {
		shape[i] = -1
	}
	return shape
}

// valueInfos appends the graph's inputs and outputs, each dynamic axis a dim_param of its own.
func valueInfos(b []byte, ins, outs []IOSpec) []byte {
	info := func(s IOSpec) []byte {
		dims := make([]any, len(s.Shape))
		for d, size := range s.Shape {
			dims[d] = fmt.Sprintf("%s_%d", s.Name, d)
			if size >= 0 {
				dims[d] = int(size)
			}
		}
		return tensorValueInfo(s.Name, elemType(s), dims...)
	}
	for _, s := range ins {
		b = bytesField(b, 11, info(s))
	}
	for _, s := range outs {
		b = bytesField(b, 12, info(s))
	}
	return b
}
