package tests

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"marspec/mar"
	"marspec/onnxrt"
)

// The largest RMS(int8 - fp32) / RMS(fp32) allowed for the transformer's z and the head's
// output on the embedded target is onnxrt.Int8ToleranceRMS(): with VNNI measured 0.013 and
// 0.011 (docs/BENCHMARKS.md) against 0.03, so this catches a wrong scale or a transposed weight
// (errors of order 1) with room for rounding; on AVX2 alone 0.064 and 0.058 against 0.1.

// minRelRMS proves the int8 graphs were the ones run: identical outputs would mean the fp32
// graphs were opened again.
const minRelRMS = 1e-4

// TestQuantizePack quantises a copy of the embedded target (with its fused head) in a temp
// folder, checks the manifest entry, compares the int8 graphs' outputs with the fp32 graphs'
// through ONNX Runtime on the same inputs, and runs `marspec generate --precision int8` on it,
// per-step and with the fused head.
func TestQuantizePack(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	pack := filepath.Join(t.TempDir(), "pack")
	if out, err := exec.Command(python, tool("packs", "quantize_pack.py"), filepath.Join(repoRoot, "models", "target"), "--out", pack).CombinedOutput(); err != nil {
		t.Fatalf("quantize_pack.py: %v\n%s", err, out)
	}
	man, err := mar.LoadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := man.Precisions[mar.Int8]
	if !ok || spec.Transformer != "transformer.int8.onnx" || spec.Head != "head.int8.onnx" || spec.HeadLoop != "head_loop.int8.onnx" {
		t.Fatalf("manifest precisions: %+v, want int8 with transformer, head and head_loop graphs", man.Precisions)
	}
	var record struct {
		FP32Layers map[string][]string `json:"fp32_layers"`
	}
	if err := json.Unmarshal(spec.Quantization, &record); err != nil {
		t.Fatal(err)
	}
	// the 16-wide layers stay fp32 (--min-dim 64): the token projection in, the final one out
	if !slices.Equal(record.FP32Layers["transformer"], []string{"/z_proj/MatMul"}) ||
		!slices.Equal(record.FP32Layers["head"], []string{"/net/input_proj/Gemm", "/net/final_layer/linear/Gemm"}) {
		t.Errorf("fp32 layers %v, want z_proj in the transformer, input_proj and final_layer.linear in the head", record.FP32Layers)
	}
	if spec.Picked != "transformer_picked.int8.onnx" {
		t.Errorf("the picked transformer's int8 variant: %q, want transformer_picked.int8.onnx", spec.Picked)
	}
	// the committed one is what the script makes
	made, _ := os.ReadFile(filepath.Join(pack, "transformer_picked.int8.onnx"))
	if committed, err := os.ReadFile(filepath.Join(repoRoot, "models", "target", "transformer_picked.int8.onnx")); err != nil || string(made) != string(committed) {
		t.Errorf("transformer_picked.int8.onnx made here (%d bytes) is not the committed one (%d bytes, %v)", len(made), len(committed), err)
	}
	for _, f := range []string{"transformer", "head", "head_loop", "transformer_cached", "transformer_picked"} {
		a, _ := os.Stat(filepath.Join(pack, f+".onnx"))
		b, err := os.Stat(filepath.Join(pack, f+".int8.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		if b.Size()*5 > a.Size()*2 { // int8 weights: about a quarter of the bytes
			t.Errorf("%s.int8.onnx is %d bytes, over 40%% of %s.onnx's %d: weights not int8?", f, b.Size(), f, a.Size())
		}
	}

	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	fp32, int8 := openAt(t, pack, mar.FP32), openAt(t, pack, mar.Int8)
	zRef, outRef := runGraphs(t, fp32)
	z, out := runGraphs(t, int8)
	for _, c := range []struct {
		name     string
		got, ref []float32
	}{{"transformer z", z, zRef}, {"head output", out, outRef}} {
		rel := relRMS(c.got, c.ref)
		t.Logf("%s: int8 vs fp32 relative RMS difference %.4f", c.name, rel)
		if maxRelRMS := onnxrt.Int8ToleranceRMS(); rel > maxRelRMS || rel < minRelRMS {
			t.Errorf("%s: int8 vs fp32 relative RMS difference %.4g, want %g to %g", c.name, rel, minRelRMS, maxRelRMS)
		}
	}

	// each row is quantised with its own scale: a row's result is the same in any batch
	for _, m := range []*mar.Model{fp32, int8} {
		if d := batchDependence(t, m); d != 0 {
			t.Errorf("%s: a row's output changes by up to %g when its batch-mates change; want 0 (rows independent)", m.Manifest.Name, d)
		}
	}

	bin := buildMarspec(t)
	for _, loop := range []string{"off", "on"} {
		outDir := filepath.Join(t.TempDir(), "gen-"+loop)
		cmd := exec.Command(bin, "generate", "--target", pack, "--precision", "int8", "--class", "0,7", "--n", "2",
			"--threads", "1", "--quiet", "--json", "--out", outDir)
		cmd.Env = append(os.Environ(), "MARSPEC_ORT_LIB="+lib, "MARSPEC_HEAD_LOOP="+loop)
		log, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("generate --precision int8 (head loop %s): %v\n%s", loop, err, log)
		}
		if !strings.Contains(string(log), "precision=int8") {
			t.Errorf("head loop %s: provenance lacks precision=int8:\n%s", loop, log)
		}
		if pngs, _ := filepath.Glob(filepath.Join(outDir, "*.png")); len(pngs) != 4 {
			t.Errorf("head loop %s: %d PNGs, want 4", loop, len(pngs))
		}
	}

	// the cached transformer at int8: quantised with the others, run by --cache on
	outDir := filepath.Join(t.TempDir(), "gen-cache")
	cmd := exec.Command(bin, "generate", "--target", pack, "--mode", "target", "--num-iter", "8", "--cache", "on", "--precision", "int8",
		"--class", "0,7", "--n", "1", "--threads", "1", "--quiet", "--json", "--out", outDir)
	cmd.Env = append(os.Environ(), "MARSPEC_ORT_LIB="+lib)
	if log, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(log), "precision=int8") || !strings.Contains(string(log), "cache=") {
		t.Errorf("generate --cache on --precision int8: %v\n%s", err, log)
	}
	if !slices.Contains(record.FP32Layers["transformer_cached"], "/z_proj/MatMul") || spec.Cached != "transformer_cached.int8.onnx" {
		t.Errorf("the cached transformer's int8 variant: %q, fp32 layers %v", spec.Cached, record.FP32Layers["transformer_cached"])
	}
}

func openAt(t *testing.T, dir, precision string) *mar.Model {
	t.Helper()
	p, err := mar.LoadPackDirAt(dir, precision)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatalf("%s: %v", precision, err)
	}
	return m
}

// runGraphs runs the transformer on three rows (a third, two thirds and none of the tokens
// known; the last without its class) and the head on 12 rows of that z at several timesteps.
func runGraphs(t *testing.T, m *mar.Model) (z, out []float32) {
	t.Helper()
	man := m.Manifest
	L, D, W, B := man.SeqLen(), man.TokenDim, man.Width, 3
	rng := rand.New(rand.NewPCG(3, 4))
	tokens, mask := make([]float32, B*L*D), make([]float32, B*L)
	for i := range tokens {
		tokens[i] = float32(rng.NormFloat64() * 0.6)
	}
	for r := 0; r < B; r++ {
		for pos := 0; pos < L; pos++ {
			if pos*3 >= (r+1)*L { // row r knows the first (r+1)/3 of the positions
				mask[r*L+pos] = 1
			}
		}
	}
	z = make([]float32, B*L*W)
	if err := m.Transformer.Forward(tokens, mask, []int64{1, 7, 3}, []float32{0, 0, 1}, B, z); err != nil {
		t.Fatal(err)
	}
	const n = 12
	xt, ts := make([]float32, n*D), make([]float32, n)
	for i := range xt {
		xt[i] = float32(rng.NormFloat64())
	}
	for i := range ts {
		ts[i] = float32(i * 83)
	}
	out = make([]float32, n*2*D)
	if err := m.Head.Predict(xt, ts, z[:n*W], n, out); err != nil {
		t.Fatal(err)
	}
	return z, out
}

func relRMS(got, ref []float32) float64 {
	var d2, r2 float64
	for i := range ref {
		d := float64(got[i]) - float64(ref[i])
		d2 += d * d
		r2 += float64(ref[i]) * float64(ref[i])
	}
	if rel := math.Sqrt(d2 / r2); !math.IsNaN(rel) {
		return rel
	}
	return math.Inf(1) // a NaN would pass every "rel > tolerance" check
}

// batchDependence runs runGraphs' batch, then each of its transformer rows and head rows again
// alone and beside other rows, and returns the largest difference of a row's output.
func batchDependence(t *testing.T, m *mar.Model) float64 {
	t.Helper()
	man := m.Manifest
	L, D, W := man.SeqLen(), man.TokenDim, man.Width
	rng := rand.New(rand.NewPCG(5, 6))
	const B = 4
	tokens, mask := make([]float32, B*L*D), make([]float32, B*L)
	for i := range tokens {
		tokens[i] = float32(rng.NormFloat64() * 0.6)
	}
	for i := range mask {
		mask[i] = float32(i % 2)
	}
	tokens[3*L*D] = 40 // an outlier in the last row: one scale per call would shrink every row's resolution
	class, drop := []int64{1, 7, 3, 2}, []float32{0, 0, 1, 0}
	all := make([]float32, B*L*W)
	if err := m.Transformer.Forward(tokens, mask, class, drop, B, all); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for r := range B - 1 {
		one := make([]float32, L*W)
		if err := m.Transformer.Forward(tokens[r*L*D:(r+1)*L*D], mask[r*L:(r+1)*L], class[r:r+1], drop[r:r+1], 1, one); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, maxAbsDiff(one, all[r*L*W:(r+1)*L*W]))
	}
	const n = 6
	xt, ts := make([]float32, n*D), make([]float32, n)
	for i := range xt {
		xt[i] = float32(rng.NormFloat64())
	}
	for i := range ts {
		ts[i] = float32(100 + i*150)
	}
	z := append([]float32(nil), all[:n*W]...)
	z[(n-1)*W] = 60 // the outlier again, in the last head row
	out := make([]float32, n*2*D)
	if err := m.Head.Predict(xt, ts, z, n, out); err != nil {
		t.Fatal(err)
	}
	for r := range n - 1 {
		one := make([]float32, 2*D)
		if err := m.Head.Predict(xt[r*D:(r+1)*D], ts[r:r+1], z[r*W:(r+1)*W], 1, one); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, maxAbsDiff(one, out[r*2*D:(r+1)*2*D]))
	}
	return worst
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}
