package onnxrt

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
)

// Reading inputs and outputs from the protobuf gives what a session reports, for every graph
// of the embedded packs (float, int64 and double tensors, dynamic and fixed axes, int8 graphs):
// the same names, types and ranks, and each axis the same size or, where the file declares it
// symbolic and the session's shape inference fixed it, -1 (the check then accepts any size).
func TestModelIOMatchesSession(t *testing.T) {
	needRuntime(t)
	files, _ := filepath.Glob("../models/*/*.onnx")
	if len(files) < 10 {
		t.Fatalf("found %d graphs under ../models, want the embedded packs' graphs", len(files))
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		wantIn, wantOut, err := ort.GetInputOutputInfoWithONNXData(data)
		if err != nil {
			t.Fatal(err)
		}
		gotIn, gotOut, err := modelIO(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !sameIO(gotIn, wantIn) || !sameIO(gotOut, wantOut) {
			t.Fatalf("%s: read\n%v\n%v\nsession says\n%v\n%v", file, gotIn, gotOut, wantIn, wantOut)
		}
	}
}

// Bytes that are not a model are refused by name, before a session is tried.
func TestModelIORefusesGarbage(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("not an onnx model"), {0x3a, 0xff, 0xff, 0xff, 0x0f}} {
		if _, _, err := modelIO(bytes.NewReader(data), int64(len(data))); err == nil {
			t.Errorf("%q read as a model", data)
		}
	}
}

func sameIO(got, want []ort.InputOutputInfo) bool {
	if len(got) != len(want) {
		return false
	}
	for i, g := range got {
		w := want[i]
		if g.Name != w.Name || g.OrtValueType != w.OrtValueType || g.DataType != w.DataType || len(g.Dimensions) != len(w.Dimensions) {
			return false
		}
		for d, size := range g.Dimensions {
			if size != w.Dimensions[d] && size != -1 {
				return false
			}
		}
	}
	return true
}
