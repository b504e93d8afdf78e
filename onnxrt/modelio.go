package onnxrt

import (
	"errors"
	"fmt"
	"io"

	ort "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/encoding/protowire"
)

// modelIO reads a model's graph inputs and outputs from its ONNX protobuf, skipping the weights
// in place. onnxruntime_go's GetInputOutputInfo builds a whole temporary session for that (graph
// optimisation and every weight copied), which doubled the time to open a graph and its peak
// memory: at MAR-B size 689 MB of weights and seconds per graph. Inputs that are initialisers
// (models before IR version 4 list them) are left out, as ONNX Runtime's session leaves them.
func modelIO(r io.ReaderAt, size int64) (ins, outs []ort.InputOutputInfo, err error) {
	model := pbMessage{r: r, end: size}
	var graph *pbMessage
	for model.more() {
		f, err := model.field()
		if err != nil {
			return nil, nil, err
		}
		if f.num == 7 && f.typ == protowire.BytesType { // ModelProto.graph
			g := f.sub
			graph = &g
		}
	}
	if graph == nil {
		return nil, nil, errors.New("no graph in the model")
	}
	initialisers := map[string]bool{}
	var allIns []ort.InputOutputInfo
	for graph.more() {
		f, err := graph.field()
		if err != nil {
			return nil, nil, err
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case 5: // GraphProto.initializer
			name, err := f.sub.stringField(8) // TensorProto.name
			if err != nil {
				return nil, nil, err
			}
			initialisers[name] = true
		case 11, 12: // GraphProto.input, output
			info, err := valueInfo(f.sub)
			if err != nil {
				return nil, nil, err
			}
			if f.num == 11 {
				allIns = append(allIns, info)
			} else {
				outs = append(outs, info)
			}
		}
	}
	for _, in := range allIns {
		if !initialisers[in.Name] {
			ins = append(ins, in)
		}
	}
	return ins, outs, nil
}

// valueInfo reads a ValueInfoProto: name, and for a tensor its element type and shape (a
// symbolic or unknown dimension is -1, as ONNX Runtime reports it).
func valueInfo(m pbMessage) (ort.InputOutputInfo, error) {
	info := ort.InputOutputInfo{OrtValueType: ort.ONNXTypeUnknown}
	for m.more() {
		f, err := m.field()
		if err != nil {
			return info, err
		}
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			b, err := f.sub.bytes()
			if err != nil {
				return info, err
			}
			info.Name = string(b)
		case f.num == 2 && f.typ == protowire.BytesType: // TypeProto
			if err := tensorType(f.sub, &info); err != nil {
				return info, err
			}
		}
	}
	return info, nil
}

// tensorType fills info from a TypeProto whose tensor_type (field 1) is set.
func tensorType(m pbMessage, info *ort.InputOutputInfo) error {
	for m.more() {
		f, err := m.field()
		if err != nil {
			return err
		}
		if f.num != 1 || f.typ != protowire.BytesType {
			continue // a sequence, map or optional: left unknown, so the check names it
		}
		info.OrtValueType = ort.ONNXTypeTensor
		info.Dimensions = ort.Shape{}
		t := f.sub
		for t.more() {
			g, err := t.field()
			if err != nil {
				return err
			}
			switch {
			case g.num == 1 && g.typ == protowire.VarintType: // elem_type
				info.DataType = ort.TensorElementDataType(g.val)
			case g.num == 2 && g.typ == protowire.BytesType: // TensorShapeProto
				if info.Dimensions, err = shape(g.sub); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func shape(m pbMessage) (ort.Shape, error) {
	dims := ort.Shape{}
	for m.more() {
		f, err := m.field()
		if err != nil {
			return nil, err
		}
		if f.num != 1 || f.typ != protowire.BytesType { // dim
			continue
		}
		size := int64(-1)
		d := f.sub
		for d.more() {
			g, err := d.field()
			if err != nil {
				return nil, err
			}
			if g.num == 1 && g.typ == protowire.VarintType { // dim_value
				size = int64(g.val)
			}
		}
		dims = append(dims, size)
	}
	return dims, nil
}

// pbMessage is a protobuf message at [off, end) of r, read field by field; a length-delimited
// field is handed back as a window, read only if its reader asks (the weights never are).
type pbMessage struct {
	r        io.ReaderAt
	off, end int64
}

type pbField struct {
	num protowire.Number
	typ protowire.Type
	val uint64    // a varint's value
	sub pbMessage // a length-delimited field's bytes
}

var errTruncated = errors.New("truncated protobuf")

func (m *pbMessage) more() bool { return m.off < m.end }

// varint reads one varint at m.off.
func (m *pbMessage) varint() (uint64, error) {
	var buf [binaryMaxVarint]byte
	n, err := m.r.ReadAt(buf[:min(int64(len(buf)), m.end-m.off)], m.off)
	if n == 0 {
		if err == nil {
			err = errTruncated
		}
		return 0, err
	}
	v, k := protowire.ConsumeVarint(buf[:n])
	if k < 0 {
		return 0, errTruncated
	}
	m.off += int64(k)
	return v, nil
}

const binaryMaxVarint = 10

func (m *pbMessage) field() (pbField, error) {
	tag, err := m.varint()
	if err != nil {
		return pbField{}, err
	}
	num, typ := protowire.DecodeTag(tag)
	if num <= 0 {
		return pbField{}, fmt.Errorf("bad protobuf field number at byte %d", m.off)
	}
	f := pbField{num: num, typ: typ}
	switch typ {
	case protowire.VarintType:
		f.val, err = m.varint()
	case protowire.Fixed32Type:
		m.off += 4
	case protowire.Fixed64Type:
		m.off += 8
	case protowire.BytesType:
		var n uint64
		if n, err = m.varint(); err == nil {
			if n > uint64(m.end-m.off) {
				return f, errTruncated
			}
			f.sub = pbMessage{r: m.r, off: m.off, end: m.off + int64(n)}
			m.off += int64(n)
		}
	default: // groups are not used by ONNX
		return f, fmt.Errorf("unsupported protobuf wire type %d", typ)
	}
	if m.off > m.end {
		return f, errTruncated
	}
	return f, err
}

// bytes reads the whole window (only for small fields: names).
func (m pbMessage) bytes() ([]byte, error) {
	b := make([]byte, m.end-m.off)
	if _, err := m.r.ReadAt(b, m.off); err != nil {
		return nil, err
	}
	return b, nil
}

// stringField is the value of the message's string field num ("" when absent).
func (m pbMessage) stringField(num protowire.Number) (string, error) {
	for m.more() {
		f, err := m.field()
		if err != nil {
			return "", err
		}
		if f.num == num && f.typ == protowire.BytesType {
			b, err := f.sub.bytes()
			return string(b), err
		}
	}
	return "", nil
}

// HasControlFlow says whether a model (its bytes, or the file at path when data is nil) has a
// Loop, If or Scan node, which ONNX Runtime refuses to capture as a CUDA graph. Only the main
// graph is read: subgraphs hang from those nodes.
func HasControlFlow(data []byte, path string) (found bool, err error) {
	if data != nil {
		path = ""
	}
	err = modelSource{data: data, path: path}.read(func(r io.ReaderAt, size int64) error {
		model := pbMessage{r: r, end: size}
		for model.more() {
			f, err := model.field()
			if err != nil {
				return err
			}
			if f.num != 7 || f.typ != protowire.BytesType { // ModelProto.graph
				continue
			}
			for g := f.sub; g.more(); {
				n, err := g.field()
				if err != nil {
					return err
				}
				if n.num != 1 || n.typ != protowire.BytesType { // GraphProto.node
					continue
				}
				op, err := n.sub.stringField(4) // NodeProto.op_type
				if err != nil {
					return err
				}
				if op == "Loop" || op == "If" || op == "Scan" {
					found = true
					return nil
				}
			}
		}
		return nil
	})
	return found, err
}
