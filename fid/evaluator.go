package fid

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
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
		// Resize is how images of another size reach height x width: "" refuses them,
		// "tf1_bilinear" is ResizeTF1 (the standard FID Inception's own resize)
		Resize string `json:"resize,omitempty"`
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
	if m.Input.Resize != ResizeNone && m.Input.Resize != ResizeTF1Bilinear {
		return nil, fmt.Errorf("evaluator %s/manifest.json: input resize %q unknown (allowed: absent for none, %s)", source, m.Input.Resize, ResizeTF1Bilinear)
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

// Image is 8-bit pixels [Channels][Height][Width].
type Image struct {
	Pix                     []uint8
	Height, Width, Channels int
}

// Evaluate returns features [n][dim] and class probabilities [n][classes] of n images given
// as 8-bit pixels [C][H][W] each, at the evaluator's size or, when its manifest resizes, square
// with 1 or 3 channels: generated images arrive here as bare slices (eval's chunks), and
// C*S*S fixes C in {1, 3} and S because 3 is no ratio of two squares.
func (e *Evaluator) Evaluate(images [][]uint8) ([][]float64, [][]float64, error) {
	ims := make([]Image, len(images))
	for i, px := range images {
		im, err := e.shapeOf(px)
		if err != nil {
			return nil, nil, fmt.Errorf("image %d: %v", i, err)
		}
		ims[i] = im
	}
	return e.EvaluateImages(ims)
}

func (e *Evaluator) shapeOf(px []uint8) (Image, error) {
	in := e.Manifest.Input
	if len(px) == in.Channels*in.Height*in.Width {
		return Image{Pix: px, Height: in.Height, Width: in.Width, Channels: in.Channels}, nil
	}
	if in.Resize != ResizeNone {
		for _, c := range []int{in.Channels, 1} {
			s := int(math.Round(math.Sqrt(float64(len(px) / c))))
			if s > 0 && c*s*s == len(px) {
				return Image{Pix: px, Height: s, Width: s, Channels: c}, nil
			}
		}
		return Image{}, fmt.Errorf("%d pixel values are no square image of %d or 1 channels", len(px), in.Channels)
	}
	return Image{}, fmt.Errorf("has %d pixel values, the evaluator needs %dx%dx%d (its manifest resizes nothing)", len(px), in.Channels, in.Height, in.Width)
}

// maxInputBytes bounds one ONNX call's input (64 MiB: 62 images at 299x299x3), which also
// bounds the network's activations, whatever batch the caller hands over.
const maxInputBytes = 64 << 20

// EvaluateImages is Evaluate for images of known size: resized when the manifest says how,
// greyscale broadcast to 3 channels when the evaluator wants colour.
func (e *Evaluator) EvaluateImages(images []Image) ([][]float64, [][]float64, error) {
	in := e.Manifest.Input
	size := in.Channels * in.Height * in.Width
	per := max(1, maxInputBytes/(4*size))
	var feats, probs [][]float64
	for start := 0; start < len(images); start += per {
		batch := images[start:min(start+per, len(images))]
		x := make([]float32, len(batch)*size)
		for i, im := range batch {
			if err := e.input(im, x[i*size:(i+1)*size]); err != nil {
				return nil, nil, fmt.Errorf("image %d: %v", start+i, err)
			}
		}
		f, p, err := e.run(len(batch), x)
		if err != nil {
			return nil, nil, err
		}
		feats, probs = append(feats, f...), append(probs, p...)
	}
	return feats, probs, nil
}

// input writes one image as the network's scaled float input [C][H][W].
func (e *Evaluator) input(im Image, x []float32) error {
	if err := e.Accepts(im); err != nil {
		return err
	}
	in := e.Manifest.Input
	same := im.Height == in.Height && im.Width == in.Width
	plane, inPlane := in.Height*in.Width, im.Height*im.Width
	src := make([]float32, inPlane)
	for c := 0; c < in.Channels; c++ {
		dst := x[c*plane : (c+1)*plane]
		pix := im.Pix[min(c, im.Channels-1)*inPlane:][:inPlane] // grey: every channel reads plane 0
		if same {
			for j, p := range pix {
				dst[j] = scaleValue(float32(p), in.Scale)
			}
			continue
		}
		for j, p := range pix {
			src[j] = float32(p)
		}
		// TF resizes the 0-255 values and scales after (the graph's Sub/Mul follow its
		// ResizeBilinear); both are affine, so the order only moves rounding
		if err := ResizeTF1(src, im.Height, im.Width, in.Height, in.Width, dst); err != nil {
			return err
		}
		for j, v := range dst {
			dst[j] = scaleValue(v, in.Scale)
		}
	}
	return nil
}

// Accepts says why the evaluator cannot take an image, or nil.
func (e *Evaluator) Accepts(im Image) error {
	in := e.Manifest.Input
	if len(im.Pix) != im.Channels*im.Height*im.Width || im.Height < 1 || im.Width < 1 {
		return fmt.Errorf("%d pixel values for %dx%dx%d", len(im.Pix), im.Channels, im.Height, im.Width)
	}
	if im.Channels != in.Channels && !(im.Channels == 1 && in.Channels == 3) {
		return fmt.Errorf("has %d channels, the evaluator needs %d (or 1, broadcast to 3)", im.Channels, in.Channels)
	}
	if (im.Height != in.Height || im.Width != in.Width) && in.Resize == ResizeNone {
		return fmt.Errorf("image is %dx%d, the evaluator needs %dx%d (its manifest resizes nothing)", im.Width, im.Height, in.Width, in.Height)
	}
	return nil
}

func (e *Evaluator) run(n int, x []float32) ([][]float64, [][]float64, error) {
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

func scaleValue(v float32, scale string) float32 {
	switch scale {
	case "inception":
		return (v - 128) / 128
	case "unit":
		return v / 255
	}
	return v/127.5 - 1
}

// Close releases the session.
func (e *Evaluator) Close() error { return e.graph.Close() }
