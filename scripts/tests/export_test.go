// Package tests holds the Go side of the Python tools' checks (scripts/README.md). The first is
// the export round trip: the official MAR architecture at toy size with random weights is
// exported by scripts/packs/export_mar.py, its ONNX graphs are checked against PyTorch through
// the ONNX Runtime marspec uses, and the pack is run end to end by `marspec generate` (VAE
// decoder included).
package tests

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"marspec/mar"
	"marspec/onnxrt"
)

const python = "/usr/bin/python3"

// The tests run in scripts/tests: the Python fixtures they run (test_*.py) are beside them, the
// tools in the folders of scripts/, and the repository's root two folders up.
const (
	scriptsDir = ".."
	repoRoot   = "../.."
)

// tool is the path of a Python tool in scripts/FOLDER.
func tool(folder, name string) string { return filepath.Join(scriptsDir, folder, name) }

// tolerance is the largest absolute difference allowed between PyTorch and ONNX Runtime.
const tolerance = 1e-4

// needTorch skips when Debian's python3-torch/python3-onnx are absent, except under
// MARSPEC_REQUIRE_TORCH=1 (CI installs them): there a missing torch is a failure, so the round
// trip cannot silently stop running.
func needTorch(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import torch, onnx").CombinedOutput()
	if err == nil {
		return
	}
	msg := "needs " + python + " with torch and onnx (apt-get install python3-torch python3-onnx): " + strings.TrimSpace(lastLine(string(out)))
	if os.Getenv("MARSPEC_REQUIRE_TORCH") == "1" {
		t.Fatal(msg + " (MARSPEC_REQUIRE_TORCH=1)")
	}
	t.Skip(msg)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func ortLib(t *testing.T) string {
	t.Helper()
	if env := os.Getenv("MARSPEC_ORT_LIB"); env != "" {
		return env
	}
	lib, err := filepath.Abs(filepath.Join(repoRoot, onnxrt.DefaultLib))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("%s is absent: run `make setup`", lib)
	}
	return lib
}

type parity struct {
	Transformer struct {
		Batch     int       `json:"batch"`
		Tokens    []float32 `json:"tokens"`
		Mask      []float32 `json:"mask"`
		ClassIDs  []int64   `json:"class_ids"`
		DropClass []float32 `json:"drop_class"`
		Z         []float64 `json:"z"`
	} `json:"transformer"`
	Head struct {
		N   int       `json:"n"`
		Xt  []float32 `json:"x_t"`
		T   []float32 `json:"t"`
		Z   []float32 `json:"z"`
		Out []float64 `json:"out"`
	} `json:"head"`
	Decoder struct {
		Batch  int       `json:"batch"`
		Tokens []float32 `json:"tokens"`
		Image  []float64 `json:"image"`
		Shape  []int     `json:"shape"`
	} `json:"decoder"`
	RawDiffers float64 `json:"raw_differs"`
}

func maxAbsErr(t *testing.T, what string, got []float32, want []float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: ONNX gave %d values, PyTorch %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		worst = math.Max(worst, math.Abs(float64(got[i])-want[i]))
	}
	if worst > tolerance || math.IsNaN(worst) {
		t.Errorf("%s: ONNX differs from PyTorch by up to %.3g (allowed %g)", what, worst, tolerance)
	}
	return worst
}

func TestOfficialExportRoundTrip(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	cmd := exec.Command(python, "test_export_mar.py", "--out", dir)
	cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("test_export_mar.py failed: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "parity.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want parity
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if want.RawDiffers < 1e-3 {
		t.Fatalf("raw and EMA weights give the same outputs (max diff %g): the test cannot tell which were exported", want.RawDiffers)
	}

	packDir := filepath.Join(dir, "pack")
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	pack, err := mar.LoadPackDir(packDir)
	if err != nil {
		t.Fatal(err)
	}
	m := pack.Manifest
	if m.Tokenizer.Kind != mar.TokenizerVAEDecoder || m.Tokenizer.Graph != "decoder.onnx" || m.Diffusion.ClipX0 || len(m.Classes) != 4 {
		t.Fatalf("manifest: tokenizer %+v, clip_x0 %v, %d classes; want vae_decoder/decoder.onnx, false, 4", m.Tokenizer, m.Diffusion.ClipX0, len(m.Classes))
	}
	model, err := pack.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	dec, ok := model.Tokenizer.(*mar.ONNXDecoder)
	if !ok {
		t.Fatalf("tokenizer is %T, want *mar.ONNXDecoder", model.Tokenizer)
	}

	tr := want.Transformer
	z := make([]float32, len(tr.Z))
	if err := model.Transformer.Forward(tr.Tokens, tr.Mask, tr.ClassIDs, tr.DropClass, tr.Batch, z); err != nil {
		t.Fatal(err)
	}
	errT := maxAbsErr(t, "transformer.onnx z", z, tr.Z)
	checkExternalData(t, filepath.Join(dir, "pack-external"), tr.Tokens, tr.Mask, tr.ClassIDs, tr.DropClass, tr.Batch, tr.Z)

	h := want.Head
	out := make([]float32, len(h.Out))
	if err := model.Head.Predict(h.Xt, h.T, h.Z, h.N, out); err != nil {
		t.Fatal(err)
	}
	errH := maxAbsErr(t, "head.onnx out", out, h.Out)

	d := want.Decoder
	img := make([]float32, len(d.Image))
	if err := dec.Run(d.Batch, [][]float32{img}, d.Tokens); err != nil {
		t.Fatal(err)
	}
	errD := maxAbsErr(t, "decoder.onnx image", img, d.Image)
	t.Logf("max abs error ONNX vs PyTorch: transformer %.2g, head %.2g, decoder %.2g", errT, errH, errD)

	if m.Cache == nil || model.Cached == nil {
		t.Fatalf("exported pack has no cached transformer (manifest cache %+v)", m.Cache)
	}
	generateEndToEnd(t, lib, packDir, m)
}

// generateEndToEnd builds the marspec binary and runs generate on the exported pack: the
// transformer, head and decoder graphs as a user gets them.
func generateEndToEnd(t *testing.T, lib, packDir string, m *mar.Manifest) {
	bin := buildMarspec(t)
	outDir := filepath.Join(t.TempDir(), "gen")
	// with the cache across AR steps on, lazy steps included (steps 2 and 3 of 4)
	cmd := exec.Command(bin, "generate", "--model", packDir, "--class", "0", "--n", "2", "--steps", "5",
		"--num-iter", "4", "--threads", "1", "--cache", "on", "--cache-full-steps", "1", "--cache-refresh-every", "3", "--out", outDir)
	cmd.Env = append(os.Environ(), "MARSPEC_ORT_LIB="+lib)
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("marspec generate on the exported pack: %v\n%s", err, log)
	}
	pngs, _ := filepath.Glob(filepath.Join(outDir, "*.png"))
	var images int
	for _, p := range pngs {
		if filepath.Base(p) == "grid.png" {
			continue
		}
		images++
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		b := img.Bounds()
		if b.Dx() != m.Image.Width || b.Dy() != m.Image.Height {
			t.Errorf("%s is %dx%d, want %dx%d", p, b.Dx(), b.Dy(), m.Image.Width, m.Image.Height)
		}
		first, distinct := img.At(0, 0), false
		for y := b.Min.Y; y < b.Max.Y && !distinct; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if img.At(x, y) != first {
					distinct = true
					break
				}
			}
		}
		if !distinct {
			t.Errorf("%s is one flat colour: the decoder output did not reach the PNG", p)
		}
	}
	if images != 2 {
		t.Fatalf("generate wrote %d images (%v), want 2\n%s", images, pngs, log)
	}
}

// checkExternalData opens the pack whose transformer keeps its weights in transformer.onnx.data
// (how MAR-H's is exported) and checks it gives PyTorch's output too.
func checkExternalData(t *testing.T, dir string, tokens, mask []float32, classIDs []int64, drop []float32, batch int, want []float64) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "transformer.onnx.data")); err != nil {
		t.Fatalf("export_mar.py --external-data wrote no transformer.onnx.data: %v", err)
	}
	// its cached graph (weights in transformer_cached.onnx.data) serves the transformer's
	// passes, so transformer.onnx is neither read nor opened (at the test size only with the
	// threshold lowered to MAR-B's side of it)
	was := mar.FullPassesFromCacheBytes
	mar.FullPassesFromCacheBytes = 0
	t.Cleanup(func() { mar.FullPassesFromCacheBytes = was })
	pack, err := mar.LoadPackDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if pack.TransformerFile != "" || pack.Transformer != nil {
		t.Fatalf("pack with a cached graph: TransformerFile %q, %d bytes read; want neither", pack.TransformerFile, len(pack.Transformer))
	}
	model, err := pack.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	z := make([]float32, len(want))
	if err := model.Transformer.Forward(tokens, mask, classIDs, drop, batch, z); err != nil {
		t.Fatal(err)
	}
	maxAbsErr(t, "transformer_cached.onnx with external data, full pass z", z, want)
	if pack.CachedFile == "" || pack.Cached != nil || model.Cached == nil {
		t.Fatalf("pack with external data: cached transformer file %q, %d bytes read, opened %v; want it opened by path",
			pack.CachedFile, len(pack.Cached), model.Cached != nil)
	}
}
