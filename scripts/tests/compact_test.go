package tests

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"marspec/mar"
	"marspec/onnxrt"
)

// compact_transformer.py exports the target's transformer from the pack's own weights with the
// encoder over the known tokens only, or with every token and the unknown ones hidden as keys
// (the graph the embedded packs had before): through ONNX Runtime the two must give the same z
// on a batch whose rows know different numbers of tokens (none, a few, most, all).
func TestCompactTransformerEqualsMaskedKeys(t *testing.T) {
	needTorch(t)
	if err := onnxrt.Init(ortLib(t), onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	for _, path := range []string{"compact", "masked-keys"} {
		dir := filepath.Join(t.TempDir(), "target")
		if out, err := exec.Command("cp", "-r", filepath.Join(repoRoot, "models", "target"), dir).CombinedOutput(); err != nil {
			t.Fatalf("copy: %v\n%s", err, out)
		}
		cmd := exec.Command(python, tool("packs", "compact_transformer.py"), "--pack", dir, "--path", path,
			"--fixture", filepath.Join(repoRoot, "mar", "testdata", "parity_target.json"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("compact_transformer.py --path %s: %v\n%s", path, err, out)
		}
		dirs[path] = dir
	}
	a, errA := os.ReadFile(filepath.Join(dirs["compact"], "transformer.onnx"))
	b, errB := os.ReadFile(filepath.Join(dirs["masked-keys"], "transformer.onnx"))
	if errA != nil || errB != nil || string(a) == string(b) {
		t.Fatalf("the two exports should be different graphs (%v, %v)", errA, errB)
	}
	z := map[string][]float32{}
	var L, D, W int
	for name, path := range map[string]string{"masked keys": dirs["masked-keys"], "compact": dirs["compact"]} {
		pack, err := mar.LoadPackDir(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := pack.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		L, D, W = m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
		rng := rand.New(rand.NewPCG(3, 4))
		known := []int{0, 5, 30, L}
		b := len(known)
		tokens, mask := make([]float32, b*L*D), make([]float32, b*L)
		for i := range tokens {
			tokens[i] = float32(rng.NormFloat64() * 0.5)
		}
		for r, k := range known {
			for _, pos := range rng.Perm(L)[k:] { // the rest stay unknown
				mask[r*L+pos] = 1
			}
		}
		out := make([]float32, b*L*W)
		if err := m.Transformer.Forward(tokens, mask, []int64{0, 3, 7, 9}, []float32{0, 1, 0, 0}, b, out); err != nil {
			t.Fatal(err)
		}
		z[name] = out
	}
	worst := 0.0
	for i := range z["compact"] {
		worst = math.Max(worst, math.Abs(float64(z["compact"][i]-z["masked keys"][i])))
	}
	if worst > 1e-4 || math.IsNaN(worst) {
		t.Fatalf("compact z differs from the masked-key z by %.3g (allowed 1e-4)", worst)
	}
	t.Logf("max |compact z - masked-key z| = %.2g over %d rows of %d tokens", worst, 4, L)
}
