package tests

import (
	"os/exec"
	"path/filepath"
	"testing"

	"marspec/mar"
	"marspec/onnxrt"
)

// foldTolerance: RMS(folded - plain) / RMS(plain) of generated tokens when half_head.py's folds
// are applied to a float32 fused head, nothing rounded to fp16. The folds change the order of
// float32 operations only, so this measures reassociation carried through the AR steps;
// a fold with a wrong term moves tokens by far more (dropping the norm bias's constant term moved
// them by 0.2 to 0.3, leaving the norm weight out of the scale by 0.07 to 0.17: checked).
const foldTolerance = 1e-4

// foldVariants writes two copies of pack whose head_loop.onnx is the fused head as half_pack.py
// prepares it for fp16 (one norm node, float32 sampler, guidance MatMul), still float32: plain,
// and folded (fold_modulation, lean_sampler and skip_norms on top). Both get the same LayerNorm weights and
// biases drawn far from 1 and 0, where the packs' own sit close to them, so a fold that loses
// either cannot hide under the tolerance.
const foldVariants = `
import json, os, shutil, sys
import numpy as np
import onnx
from onnx import numpy_helper
sys.path.insert(0, sys.argv[4])
import half_head, loop_weights
src, plain, folded = sys.argv[1:4]
# "own": the final layer's Gemm counts as staying fp32, as at MAR-B's size, so its scale and
# shift come from stacks of their own; else it folds into the shared stack as the blocks do
own = sys.argv[5] == "own"
folds = lambda gemm: not (own and "final_layer" in (gemm.name or gemm.output[0]))
m = onnx.load(os.path.join(src, "head_loop.onnx"))
loop_weights.out_of_bodies(m)
rng = np.random.default_rng(3)
for i, t in enumerate(m.graph.initializer):
    if "_ln." in t.name:
        v = numpy_helper.to_array(t)
        new = rng.uniform(0.5, 1.5, v.shape) if t.name.endswith("weight") else rng.normal(0, 0.5, v.shape)
        m.graph.initializer[i].CopyFrom(numpy_helper.from_array(new.astype(np.float32), t.name))
half_head.fuse_norms(m); half_head.float_sampler(m); half_head.lean_guidance(m)
clip = json.load(open(os.path.join(src, "manifest.json")))["diffusion"].get("clip_x0", False)
for dst, fold in ((plain, False), (folded, True)):
    model = onnx.ModelProto()
    model.CopyFrom(m)
    if fold:
        print("folded", half_head.fold_modulation(model, folds), "blocks; sampler", half_head.lean_sampler(model, clip), "nodes fewer per step;",
              half_head.skip_norms(model), "residual sums into their norm")
        stacks = [n.name for n in model.graph.node if n.name.startswith(half_head.FP32)]
        assert len(stacks) == (2 if own else 0), ("own stacks' Gemms:", stacks)
    loop_weights.into_bodies(model)
    shutil.copytree(src, dst)
    onnx.save(model, os.path.join(dst, "head_loop.onnx"))
`

// TestHalfHeadFoldsExact checks the algebra of half_head.py's folds apart from fp16: the AdaLN
// shift folded into each block's Gemm and the schedule's coefficients combined per call
// (the posterior step collapsed where a pack never clips x0), and each residual sum made with
// its norm by one SkipLayerNormalization (ONNX Runtime's CPU kernel here) give the unfolded fused head's
// tokens within foldTolerance, guided, on the CI pack of MAR-B's layout (never clips) and on the
// embedded target (clips x0).
func TestHalfHeadFoldsExact(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	for _, c := range []struct{ name, pack, finalLayer string }{
		{"MAR layout, never clips, final layer on stacks of its own", randomPack(t, "ci_target", ""), "own"},
		{"embedded target, clips, final layer in the shared stack", filepath.Join(repoRoot, "models", "target"), "shared"},
	} {
		dir := t.TempDir()
		plain, folded := filepath.Join(dir, "plain"), filepath.Join(dir, "folded")
		out, err := exec.Command(python, "-c", foldVariants, c.pack, plain, folded, filepath.Join(repoRoot, "scripts", "packs"), c.finalLayer).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		t.Logf("%s: %s", c.name, out)
		if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
			t.Fatal(err)
		}
		opt := mar.Options{Seed: 7, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, NumIter: 8, Steps: 50}
		want := generate(t, openWithHeadLoop(t, plain, "on"), opt)
		got := generate(t, openWithHeadLoop(t, folded, "on"), opt)
		for i := range want {
			rel := relRMS(got[i].Tokens, want[i].Tokens)
			t.Logf("%s: image %d, folded against plain: tokens relative RMS %.2g", c.name, i, rel)
			if rel > foldTolerance {
				t.Errorf("%s: image %d, folded against plain: tokens relative RMS %.3g, want under %g", c.name, i, rel, foldTolerance)
			}
		}
	}
}
