package fid

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"marspec/onnxrt"
)

// EvaluatorManifest describes an evaluator network (docs/evaluation.md): any ONNX model that
// takes images and exposes a feature output (for FID) and a logits output (for IS).
type EvaluatorManifest struct {
	Format string `json:"format"`
	Name   string `json:"name"`
	Input  struct {
		Height   int    `json:"height"`
		Width    int    `json:"width"`
		Channels int    `json:"channels"`
		Name     string `json:"name"`
		Scale    string `json:"scale"` // minus1_1: x/127.5-1; inception: (x-128)/128; unit: x/255
	} `json:"input"`
	Features struct {
		Name string `json:"name"`
		Dim  int    `json:"dim"`
	} `json:"features"`
	Logits struct {
		Name    string `json:"name"`
		Classes int    `json:"classes"`
	} `json:"logits"`
	TestAccuracy float64         `json:"test_accuracy,omitempty"`
	Training     json.RawMessage `json:"training,omitempty"`
}

// Evaluator computes features and class probabilities of images.
type Evaluator struct {
	Manifest *EvaluatorManifest
	graph    *onnxrt.Graph
}

// LoadEvaluator opens manifest.json and model.onnx from dir in fsys (ONNX Runtime must be
// initialised).
func LoadEvaluator(fsys fs.FS, dir, source string, opt onnxrt.SessionOptions) (*Evaluator, error) {
	raw, err := fs.ReadFile(fsys, path.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("evaluator %s: cannot read manifest.json: %v", source, err)
	}
	var m EvaluatorManifest
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("evaluator %s/manifest.json: invalid JSON: %v", source, err)
	}
	if m.Format != "marspec-evaluator/1" || m.Input.Height < 1 || m.Input.Width < 1 || m.Input.Channels < 1 ||
		m.Features.Dim < 1 || m.Logits.Classes < 1 || m.Input.Name == "" || m.Features.Name == "" || m.Logits.Name == "" {
		return nil, fmt.Errorf("evaluator %s/manifest.json: needs format marspec-evaluator/1, input size and name, feature and logits names and sizes", source)
	}
	switch m.Input.Scale {
	case "minus1_1", "inception", "unit":
	default:
		return nil, fmt.Errorf("evaluator %s/manifest.json: input scale %q unknown (allowed: minus1_1, inception, unit)", source, m.Input.Scale)
	}
	model, err := fs.ReadFile(fsys, path.Join(dir, "model.onnx"))
	if err != nil {
		return nil, fmt.Errorf("evaluator %s: cannot read model.onnx: %v", source, err)
	}
	in := m.Input
	g, err := onnxrt.NewGraph(model, source+"/model.onnx", opt,
		[]onnxrt.IOSpec{{Name: in.Name, Shape: []int64{-1, int64(in.Channels), int64(in.Height), int64(in.Width)}}},
		[]onnxrt.IOSpec{{Name: m.Features.Name, Shape: []int64{-1, int64(m.Features.Dim)}}, {Name: m.Logits.Name, Shape: []int64{-1, int64(m.Logits.Classes)}}})
	if err != nil {
		return nil, err
	}
	return &Evaluator{Manifest: &m, graph: g}, nil
}

// Evaluate returns features [n][dim] and class probabilities [n][classes] of n images given
// as 8-bit pixels [C][H][W] each.
func (e *Evaluator) Evaluate(images [][]uint8) ([][]float64, [][]float64, error) {
	in := e.Manifest.Input
	size := in.Channels * in.Height * in.Width
	n := len(images)
	x := make([]float32, n*size)
	for i, img := range images {
		if len(img) != size {
			return nil, nil, fmt.Errorf("image %d has %d pixel values, the evaluator needs %dx%dx%d", i, len(img), in.Channels, in.Height, in.Width)
		}
		for j, p := range img {
			x[i*size+j] = scalePixel(p, in.Scale)
		}
	}
	d, k := e.Manifest.Features.Dim, e.Manifest.Logits.Classes
	feats, logits := make([]float32, n*d), make([]float32, n*k)
	if err := e.graph.Run(n, [][]float32{feats, logits}, x); err != nil {
		return nil, nil, err
	}
	f, p := make([][]float64, n), make([][]float64, n)
	for i := range f {
		f[i] = make([]float64, d)
		for j := range f[i] {
			f[i][j] = float64(feats[i*d+j])
		}
		p[i] = Softmax(logits[i*k : (i+1)*k])
	}
	return f, p, nil
}

func scalePixel(p uint8, scale string) float32 {
	switch scale {
	case "inception":
		return (float32(p) - 128) / 128
	case "unit":
		return float32(p) / 255
	}
	return float32(p)/127.5 - 1
}

// Close releases the session.
func (e *Evaluator) Close() error { return e.graph.Close() }
