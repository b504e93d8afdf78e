package tests

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"marspec/mar"
	"marspec/onnxrt"
)

// A distilled head for a pack without a dataset, at CI width in MAR-B's token layout (16x16
// tokens of 16 dims, 1,000 classes, latents not clipped). First the teacher distill_head.py
// rebuilds from the pack's graphs (ckpt_from_pack.rebuild) must give the graphs' transformer
// z and head output under ONNX Runtime (1e-4). Then distill_head.py trains a few steps
// on self contexts (sequences the random ci_target generates itself) and writes the head into
// a copy of the pack; the manifest entry records the held-out RMS against the teacher for
// K = 1, 2, 4, says the teacher did not clip, and the original pack is untouched. A second
// export without --replace is refused and leaves the head as it was. Then `marspec generate
// --target COPY --sampler distilled --steps 2` makes a 256x256 image, and the same request on
// the original pack is refused (so the copy's head is what ran).
func TestDistillHeadAnyPack(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	env := append(os.Environ(), "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")
	orig := randomPack(t, "ci_target", "")
	pack := filepath.Join(t.TempDir(), "ci-target-distilled")
	copyTree(t, orig, pack)
	checkRebuiltTeacher(t, lib, env, orig)

	run := t.TempDir()
	cmd := exec.Command(python, tool("train", "distill_head.py"), "--pack", pack, "--out", run, "--max-steps", "10",
		"--minutes", "2", "--width", "32", "--depth", "1", "--pool", "8", "--gen-iter", "4",
		"--gen-fresh", "2", "--gen-batch", "2", "--images", "4", "--per-image", "16", "--batch", "32", "--heldout", "64",
		"--log-every", "5")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("distill_head.py: %v\n%s", err, out)
	}
	entry := distilledEntry(t, pack)
	if entry == nil {
		t.Fatal("the pack copy's manifest has no distilled_head")
	}
	if distilledEntry(t, orig) != nil {
		t.Fatal("the original pack got a distilled_head")
	}
	var tr struct {
		Method  string `json:"method"`
		Steps   int    `json:"steps"`
		Quality struct {
			RMS         map[string]float64 `json:"rms_vs_teacher"`
			EndpointRMS float64            `json:"teacher_endpoint_rms"`
			Rows        int                `json:"heldout_rows"`
		} `json:"quality"`
	}
	if err := json.Unmarshal(entry["training"], &tr); err != nil {
		t.Fatal(err)
	}
	t.Logf("method: %s; quality %+v", tr.Method, tr.Quality)
	if tr.Steps != 10 || !strings.Contains(tr.Method, "self contexts") || !strings.Contains(tr.Method, "not clipped") {
		t.Errorf("training entry: %d steps, method %q; want 10 steps on self contexts, x0 not clipped", tr.Steps, tr.Method)
	}
	if tr.Quality.Rows < 32 || !(tr.Quality.EndpointRMS > 0) {
		t.Errorf("quality: %d held-out rows, endpoint RMS %g", tr.Quality.Rows, tr.Quality.EndpointRMS)
	}
	for _, k := range []string{"1", "2", "4"} {
		v, ok := tr.Quality.RMS[k]
		if !ok || !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("quality rms_vs_teacher[%s] = %v (present %v), want a finite positive number", k, v, ok)
		}
	}

	before, err := os.ReadFile(filepath.Join(pack, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(python, tool("train", "distill_head.py"), "--export-only", "--ckpt", filepath.Join(run, "student-last.pth"), "--pack", pack)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "--replace") {
		t.Errorf("a second export without --replace: err %v, output %s; want a refusal naming --replace", err, out)
	}
	if after, _ := os.ReadFile(filepath.Join(pack, "manifest.json")); string(after) != string(before) {
		t.Error("the refused export changed the manifest")
	}

	bin := buildMarspec(t)
	gen := func(target string) (string, error) {
		out := filepath.Join(t.TempDir(), "images")
		c := exec.Command(bin, "generate", "--target", target, "--mode", "target", "--sampler", "distilled",
			"--steps", "2", "--num-iter", "4", "--class", "0", "--n", "1", "--out", out, "--grid", "none",
			"--ort-lib", lib, "--device", "cpu", "--threads", "1", "--json")
		b, err := c.CombinedOutput()
		return string(b), err
	}
	out, err := gen(pack)
	if err != nil {
		t.Fatalf("generate with the distilled head: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"images":1`) || !strings.Contains(out, "sampler=distilled") || !strings.Contains(out, "steps=2") {
		t.Errorf("generate output: %s", out)
	}
	if out, err := gen(orig); err == nil || !strings.Contains(out, "no distilled_head") {
		t.Errorf("generate --sampler distilled on the pack without a head: err %v, output %s; want a refusal", err, out)
	}
}

// checkRebuiltTeacher compares the PyTorch model ckpt_from_pack.rebuild makes of pack with the
// pack's own graphs on random inputs.
func checkRebuiltTeacher(t *testing.T, lib string, env []string, pack string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "parity.json")
	cmd := exec.Command(python, tool("packs", "ckpt_from_pack.py"), "--pack", pack, "--write-parity", path)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ckpt_from_pack.py --write-parity: %v\n%s", err, out)
	}
	var want parity
	readJSON(t, path, &want)
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	p, err := mar.LoadPackDir(pack)
	if err != nil {
		t.Fatal(err)
	}
	model, err := p.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr := want.Transformer
	z := make([]float32, len(tr.Z))
	if err := model.Transformer.Forward(tr.Tokens, tr.Mask, tr.ClassIDs, tr.DropClass, tr.Batch, z); err != nil {
		t.Fatal(err)
	}
	errT := maxAbsErr(t, "rebuilt teacher: transformer z", z, tr.Z)
	h := want.Head
	out := make([]float32, len(h.Out))
	if err := model.Head.Predict(h.Xt, h.T, h.Z, h.N, out); err != nil {
		t.Fatal(err)
	}
	errH := maxAbsErr(t, "rebuilt teacher: head out", out, h.Out)
	t.Logf("rebuilt teacher against the pack's graphs: transformer %.2g, head %.2g", errT, errH)
}

func distilledEntry(t *testing.T, pack string) map[string]json.RawMessage {
	t.Helper()
	var m struct {
		Distilled map[string]json.RawMessage `json:"distilled_head"`
	}
	readJSON(t, filepath.Join(pack, "manifest.json"), &m)
	return m.Distilled
}
