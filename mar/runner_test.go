package mar

import (
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/onnxrt"
)

// openTarget opens the committed target pack's graphs, skipping when they or the runtime
// are absent (the packs are produced by training; the runtime by make setup).
func openTarget(t *testing.T) (*Manifest, *ONNXTransformer, *ONNXHead) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(targetPack, "transformer.onnx")); err != nil {
		t.Skipf("%s/transformer.onnx is absent: export a target pack to run this test", targetPack)
	}
	needRuntime(t)
	p, err := LoadPackDir(targetPack)
	if err != nil {
		t.Fatal(err)
	}
	opt := onnxrt.SessionOptions{IntraOpThreads: 1}                         // light: the machine may be training
	data, err := os.ReadFile(filepath.Join(targetPack, "transformer.onnx")) // the pack leaves it to its cached graph
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewONNXTransformer(data, p.Manifest, opt, "target/transformer.onnx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	head, err := newONNXHead(nil, p.HeadFile, p.Manifest, opt, "target/head.onnx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { head.Close() })
	return p.Manifest, tr, head
}

func randSlice(rng *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = (2*rng.Float32() - 1) * scale
	}
	return s
}

// nanSlice is an output buffer that shows any value the call failed to write.
func nanSlice(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

func checkFinite(t *testing.T, what string, s []float32) {
	t.Helper()
	for i, v := range s {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("%s[%d] = %v", what, i, v)
		}
	}
}

func TestRunnerShapes(t *testing.T) {
	m, tr, head := openTarget(t)
	L, D, W := m.SeqLen(), m.TokenDim, m.Width
	if tr.SeqLen() != L || tr.TokenDim() != D || tr.Width() != W || head.TokenDim() != D || head.Width() != W {
		t.Fatalf("sizes: transformer L=%d D=%d W=%d, head D=%d W=%d; manifest L=%d D=%d W=%d",
			tr.SeqLen(), tr.TokenDim(), tr.Width(), head.TokenDim(), head.Width(), L, D, W)
	}
	rng := rand.New(rand.NewSource(1))
	for _, b := range []int{1, 3, 1, 3} {
		mask := make([]float32, b*L)
		for i := range mask {
			mask[i] = float32(rng.Intn(2)) // rows know different numbers of tokens
		}
		classes, drop := make([]int64, b), make([]float32, b)
		for i := range classes {
			classes[i] = int64(i % len(m.Classes))
		}
		drop[b-1] = 1
		z := nanSlice(b * L * W)
		if err := tr.Forward(randSlice(rng, b*L*D, 1), mask, classes, drop, b, z); err != nil {
			t.Fatal(err)
		}
		checkFinite(t, "z", z)

		out := nanSlice(b * 2 * D)
		ts := []float32{0, 500, 999}[:b]
		if err := head.Predict(randSlice(rng, b*D, 1), ts, z[:b*W], b, out); err != nil {
			t.Fatal(err)
		}
		checkFinite(t, "head out", out)
	}
	// repeated sizes reuse their tensors
	if n := tr.CachedSizes(); n != 2 {
		t.Errorf("transformer caches tensors for %d batch sizes, want 2", n)
	}
	if n := head.CachedSizes(); n != 2 {
		t.Errorf("head caches tensors for %d batch sizes, want 2", n)
	}
}

func TestRunnerBadCalls(t *testing.T) {
	m, _, head := openTarget(t)
	D, W := m.TokenDim, m.Width
	xt, ts, z, out := make([]float32, 2*D), make([]float32, 2), make([]float32, 2*W), make([]float32, 4*D)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"short input", head.Predict(xt[:D], ts, z, 2, out), "input x_t: has 16 values, want 32"},
		{"short output", head.Predict(xt, ts, z, 2, out[:D]), "output out buffer holds 16 values, need 64"},
		{"zero batch", head.Predict(xt, ts, z, 0, out), "batch size 0"},
		{"wrong type", head.Run(2, nil, xt, []int64{0, 0}, z), "input t: got []int64"},
		{"input count", head.Run(2, nil, xt, ts), "got 2 inputs, want 3 (x_t, t, z)"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) || !strings.HasPrefix(c.err.Error(), "target/head.onnx: ") {
			t.Errorf("%s: error %v, want one naming target/head.onnx and %q", c.name, c.err, c.want)
		}
	}
	head.Close()
	if err := head.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := head.Predict(xt, ts, z, 2, out); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("use after Close: %v", err)
	}
}

func TestCorruptONNXNamesFile(t *testing.T) {
	needRuntime(t)
	m, err := LoadManifest(targetPack)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := os.ReadFile(filepath.Join(targetPack, "head.onnx"))
	for name, data := range map[string][]byte{
		"garbage":   []byte("this is not an ONNX model\x00\x01\x02"),
		"empty":     {},
		"truncated": head[:len(head)/2],
	} {
		_, err := NewONNXTransformer(data, m, onnxrt.SessionOptions{}, "pack/transformer.onnx")
		if err == nil || !strings.HasPrefix(err.Error(), "pack/transformer.onnx: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s transformer: want a one-line error naming pack/transformer.onnx, got %v", name, err)
		}
		_, err = NewONNXHead(data, m, onnxrt.SessionOptions{}, "pack/head.onnx")
		if err == nil || !strings.HasPrefix(err.Error(), "pack/head.onnx: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s head: want a one-line error naming pack/head.onnx, got %v", name, err)
		}
	}
}

func TestGraphMismatchNamesFile(t *testing.T) {
	needRuntime(t)
	dir := t.TempDir()
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Skipf("%v: the committed packs are needed", err)
		}
		os.WriteFile(filepath.Join(dir, to), data, 0o644)
	}
	copyFile(filepath.Join(targetPack, "manifest.json"), "manifest.json")
	copyFile(filepath.Join(targetPack, "head_loop.onnx"), "head_loop.onnx")
	copyFile(filepath.Join(targetPack, "head.onnx"), "head.onnx")
	copyFile(filepath.Join(targetPack, "exit_draft.onnx"), "exit_draft.onnx")
	copyFile(filepath.Join(targetPack, "exit_rest.onnx"), "exit_rest.onnx")
	copyFile(filepath.Join(targetPack, "distilled_head.onnx"), "distilled_head.onnx")
	copyFile(filepath.Join(targetPack, "transformer.onnx"), "transformer.onnx")
	// the transformer where the picked transformer should be: no input "at"
	copyFile(filepath.Join(targetPack, "transformer.onnx"), "transformer_picked.onnx")
	copyFile(filepath.Join(targetPack, "transformer_cached.onnx"), "transformer_cached.onnx")
	pack, err := LoadPackDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = pack.Open(onnxrt.SessionOptions{}); err == nil || !strings.Contains(err.Error(), "transformer_picked.onnx") || !strings.Contains(err.Error(), "input") {
		t.Fatalf("error %v should name transformer_picked.onnx and the input mismatch", err)
	}
	copyFile(filepath.Join(targetPack, "transformer_picked.onnx"), "transformer_picked.onnx")
	// a head where the cached transformer should be (at fp32 it serves the transformer's passes)
	copyFile(filepath.Join(targetPack, "head.onnx"), "transformer_cached.onnx")
	if pack, err = LoadPackDir(dir); err != nil {
		t.Fatal(err)
	}
	_, err = pack.Open(onnxrt.SessionOptions{})
	if err == nil || !strings.Contains(err.Error(), "transformer_cached.onnx") || !strings.Contains(err.Error(), "input") {
		t.Fatalf("error %v should name transformer_cached.onnx and the input mismatch", err)
	}
	// the draft's head does not fit the target's manifest (width 64 vs 128)
	copyFile(filepath.Join(targetPack, "transformer_cached.onnx"), "transformer_cached.onnx")
	copyFile("../models/draft/head.onnx", "head.onnx")
	pack, _ = LoadPackDir(dir)
	if _, err = pack.Open(onnxrt.SessionOptions{}); err == nil || !strings.Contains(err.Error(), "head.onnx") || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("error %v should name head.onnx and the shape mismatch", err)
	}
	copyFile(filepath.Join(targetPack, "head.onnx"), "head.onnx")
	os.Remove(filepath.Join(dir, "head_loop.onnx"))
	pack, _ = LoadPackDir(dir)
	if _, err = pack.Open(onnxrt.SessionOptions{}); err == nil || !strings.Contains(err.Error(), "cannot read head_loop.onnx") {
		t.Fatalf("error %v should say head_loop.onnx is missing", err)
	}
	copyFile("../models/draft/head_loop.onnx", "head_loop.onnx")
	pack, _ = LoadPackDir(dir)
	// the CPU samples without the fused graph: it opens (and is checked) on first use
	m, err := pack.Open(onnxrt.SessionOptions{})
	if err != nil {
		t.Fatalf("a pack whose unused fused graph does not fit should open on the CPU: %v", err)
	}
	if _, err = m.Head.(*ONNXHead).FusedLoop(); err == nil || !strings.Contains(err.Error(), "head_loop.onnx") || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("error %v should name head_loop.onnx and the shape mismatch", err)
	}
	m.Head.(*ONNXHead).Close()
	m.Transformer.(interface{ Close() error }).Close()
	// the exit's rest graph where its draft graph should be
	copyFile(filepath.Join(targetPack, "head_loop.onnx"), "head_loop.onnx")
	copyFile(filepath.Join(targetPack, "exit_rest.onnx"), "exit_draft.onnx")
	pack, _ = LoadPackDir(dir)
	if _, err = pack.Open(onnxrt.SessionOptions{}); err == nil || !strings.Contains(err.Error(), "exit_draft.onnx") || !strings.Contains(err.Error(), "input") {
		t.Fatalf("error %v should name exit_draft.onnx and the input mismatch", err)
	}
	// the head where the distilled head should be
	copyFile(filepath.Join(targetPack, "exit_draft.onnx"), "exit_draft.onnx")
	copyFile(filepath.Join(targetPack, "head.onnx"), "distilled_head.onnx")
	pack, _ = LoadPackDir(dir)
	if _, err = pack.Open(onnxrt.SessionOptions{}); err == nil || !strings.Contains(err.Error(), "distilled_head.onnx") || !strings.Contains(err.Error(), "input") {
		t.Fatalf("error %v should name distilled_head.onnx and the input mismatch", err)
	}
}
