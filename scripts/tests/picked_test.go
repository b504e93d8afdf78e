package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// picked_transformer.py, run on the target pack without its picked graph, writes the committed
// transformer_picked.onnx byte for byte and names it in the manifest; its PyTorch check is
// live: a tolerance of 0 refuses the summation-order differences it measures.
func TestPickedTransformerScript(t *testing.T) {
	needTorch(t)
	dir := filepath.Join(t.TempDir(), "target")
	if out, err := exec.Command("cp", "-r", filepath.Join(repoRoot, "models", "target"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v\n%s", err, out)
	}
	for _, f := range []string{"transformer_picked.onnx", "transformer_picked.int8.onnx"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) ([]byte, error) {
		return exec.Command(python, append([]string{tool("packs", "picked_transformer.py"), "--pack", dir}, args...)...).CombinedOutput()
	}
	if out, err := run("--tol", "0"); err == nil || !strings.Contains(string(out), "picked z differs from the whole pass's by") {
		t.Fatalf("--tol 0 should refuse the picked graph: %v\n%s", err, out)
	}
	if out, err := run("--fixture", filepath.Join(repoRoot, "mar", "testdata", "parity_target.json")); err != nil {
		t.Fatalf("picked_transformer.py: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "transformer_picked.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(repoRoot, "models", "target", "transformer_picked.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the script's transformer_picked.onnx (%d bytes) is not the committed one (%d bytes)", len(got), len(want))
	}
	var manifest struct {
		Picked struct{ File string } `json:"picked"`
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(raw, &manifest); err != nil || manifest.Picked.File != "transformer_picked.onnx" {
		t.Errorf("manifest's picked entry: %+v (%v)", manifest.Picked, err)
	}
}
