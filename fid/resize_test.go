package fid

import (
	"strings"
	"testing"
	"testing/fstest"

	"marspec/onnxrt"
)

// TF1's legacy rule by hand: source = destination * in/out with no half-pixel offset, so
// upscaling 2 -> 4 reads 0, 0.5, 1, 1.5 (clamped to the last pixel), and downscaling 4 -> 2
// reads pixels 0 and 2 exactly (no anti-aliasing). A half-pixel (align_corners=False, TF2)
// resize would give 2 -> 4 as 0, 0.25, 0.75, 1 of the way instead.
func TestResizeTF1ByHand(t *testing.T) {
	up := make([]float32, 4)
	if err := ResizeTF1([]float32{10, 30}, 1, 2, 1, 4, up); err != nil {
		t.Fatal(err)
	}
	if want := []float32{10, 20, 30, 30}; !equal(up, want) {
		t.Fatalf("2 -> 4: %v, want %v", up, want)
	}
	down := make([]float32, 4)
	src := []float32{
		1, 2, 3, 4,
		5, 6, 7, 8,
		9, 10, 11, 12,
		13, 14, 15, 16,
	}
	if err := ResizeTF1(src, 4, 4, 2, 2, down); err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 3, 9, 11}; !equal(down, want) {
		t.Fatalf("4x4 -> 2x2: %v, want %v", down, want)
	}
	// 2x2 -> 3x3: rows and columns at 0, 2/3, 4/3 (clamped)
	out := make([]float32, 9)
	if err := ResizeTF1([]float32{0, 3, 6, 9}, 2, 2, 3, 3, out); err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 2, 3, 4, 6, 7, 6, 8, 9}
	for i := range out {
		if d := out[i] - want[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("2x2 -> 3x3: %v, want %v", out, want)
		}
	}
	if err := ResizeTF1([]float32{1, 2, 3}, 2, 2, 3, 3, out); err == nil || !strings.Contains(err.Error(), "must be positive and match") {
		t.Fatalf("wrong source length accepted: %v", err)
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPlanar(t *testing.T) {
	got := planar([]uint8{1, 2, 3, 4, 5, 6}, 1, 2, 3) // two RGB pixels
	if want := []uint8{1, 4, 2, 5, 3, 6}; string(got) != string(want) {
		t.Fatalf("planar: %v, want %v", got, want)
	}
}

func TestManifestResizeChecked(t *testing.T) {
	manifest := `{"format": "marspec-evaluator/1", "name": "x",
		"input": {"height": 299, "width": 299, "channels": 3, "name": "images", "scale": "inception", "resize": "bicubic"},
		"features": {"name": "features", "dim": 2048}, "logits": {"name": "logits", "classes": 1008}}`
	fsys := fstest.MapFS{"manifest.json": {Data: []byte(manifest)}}
	_, err := LoadEvaluator(fsys, ".", "inc", onnxrt.SessionOptions{})
	if err == nil || !strings.Contains(err.Error(), `input resize "bicubic" unknown (allowed: absent for none, tf1_bilinear)`) {
		t.Fatalf("unknown resize: %v", err)
	}
}
