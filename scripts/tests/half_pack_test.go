package tests

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"marspec/mar"
	"marspec/onnxrt"
)

// Tolerances of half_pack.py's graphs against the fp32 ones, fixed before the first run:
//   - halfGraphTolerance: RMS(fp16 - fp32) / RMS(fp32) of the transformer's z and the head's
//     output. fp16 rounds to 2^-11 (4.9e-4) relative; a value passes a few dozen roundings
//     between the inputs and an output, whose errors add mostly in quadrature (about 2e-3
//     expected), while a wrong cast, an overflow or a weight left unconverted shows as 1e-1 or
//     more (and identical outputs, under minRelRMS, would mean the fp32 graphs ran);
//   - halfImageTolerance: the mean |pixel difference| in grey levels (of 255) between an image
//     of the fp16 graphs and the fp32 image of the same seed; the AR loop feeds each token's
//     rounding error into the later steps, so this is looser than one call;
//   - halfTokenTolerance: RMS(fp16 - fp32) / RMS(fp32) of a random MAR-layout pack's generated
//     tokens (no image worth comparing: its decoder is random too).
//   - halfSamplerTolerance: the same, the fp16 fused head against the per-step head of the same
//     fp16 graphs (the float32 sampler against Go's float64 one). Set after measuring 7e-4 to
//     2e-3 on the MAR-layout pack, against 0.035 for a guidance MatMul with the wrong weights,
//     which halfTokenTolerance let through.
const (
	halfGraphTolerance   = 0.01
	halfImageTolerance   = 2.0
	halfTokenTolerance   = 0.05
	halfSamplerTolerance = 0.01
)

// TestHalfPack makes the fp16 graphs of a copy of the embedded target (transformer, cached
// transformer, head, fused head) with their CPU emulation (--cpu-check) and --plain-norms (no
// SkipLayerNormalization left in the fused head), and checks:
// the manifest entry and the sizes; that marspec's pack API refuses to open them on the CPU
// (cmd/marspec's TestPrecisionFP16Refused: the commands); that the fp16 graphs themselves, run by ONNX
// Runtime's CPU provider (which casts their fp16 nodes back to fp32), and the emulation (which
// rounds through fp16 everywhere the fp16 graphs hold a value in fp16) both give the fp32
// graphs' outputs within halfGraphTolerance; and that whole images of the emulation, per-step
// unguided, and guided with the fused head and the cache, are within halfImageTolerance of the
// fp32 images.
func TestHalfPack(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	pack, check := filepath.Join(dir, "pack"), filepath.Join(dir, "check")
	// --plain-norms here (ONNX nodes only); the other conversions below test the default
	halfPack(t, filepath.Join(repoRoot, "models", "target"), "--out", pack, "--cpu-check", check, "--plain-norms")
	checkLoopBodies(t, pack, `
    skips = [n.name for n in body.node if n.domain or n.op_type == "SkipLayerNormalization"]
    assert not skips, (body.name, "--plain-norms, yet ONNX Runtime's own operators:", skips)
`)
	man, err := mar.LoadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := man.Precisions[mar.FP16]
	if !strings.Contains(string(spec.Quantization), "--plain-norms") {
		t.Errorf("fp16 scheme %s: want --plain-norms named", spec.Quantization)
	}
	if !ok || spec.Transformer != "transformer.fp16.onnx" || spec.Head != "head.fp16.onnx" || spec.HeadLoop != "head_loop.fp16.onnx" ||
		spec.Cached != "transformer_cached.fp16.onnx" {
		t.Fatalf("manifest precisions: %+v, want fp16 with the transformer, cached transformer, head and head_loop graphs", man.Precisions)
	}
	if _, ok := man.Precisions[mar.Int8]; !ok {
		t.Error("the int8 entry was lost")
	}
	if spec.HeadLoopNeverClips {
		t.Error("fp16 entry says its fused head never clips, on a pack that clips x0")
	}
	for _, f := range []string{"transformer", "head", "head_loop", "transformer_cached"} {
		a, _ := os.Stat(filepath.Join(pack, f+".onnx"))
		b, err := os.Stat(filepath.Join(pack, f+".fp16.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		if b.Size()*10 > a.Size()*6 { // fp16 weights: about half the bytes
			t.Errorf("%s.fp16.onnx is %d bytes, over 60%% of %s.onnx's %d: weights not fp16?", f, b.Size(), f, a.Size())
		}
	}

	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	p, err := mar.LoadPackDirAt(pack, mar.FP16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Open(onnxrt.SessionOptions{IntraOpThreads: 1}); !errors.Is(err, mar.ErrFP16OnCPU) {
		t.Errorf("opening the fp16 graphs on the CPU: %v, want %v", err, mar.ErrFP16OnCPU)
	}

	ref := openWithHeadLoop(t, pack, "off")
	zRef, outRef := runGraphs(t, ref)
	for _, c := range []struct{ name, dir string }{
		{"fp16 graphs (CPU provider)", asOwnGraphs(t, pack, spec)},
		{"fp16 emulated (--cpu-check)", check},
	} {
		z, out := runGraphs(t, openWithHeadLoop(t, c.dir, "off"))
		checkHalfRMS(t, c.name+": transformer z", z, zRef)
		checkHalfRMS(t, c.name+": head output", out, outRef)
	}

	checkEmulatedImages(t, pack, check)
}

// TestHalfPackMARLayout converts a random pack of MAR-B's layout (make_random_packs.py's
// ci_target: 16x16 tokens of 16 dims, a 32-wide transformer, cached transformer and fused head)
// with --min-dim 32 and --keep final_layer/linear, so that, as at MAR-B's size with the
// defaults, its width-32 layers (the final layer's modulation among them) turn fp16, and its
// 16-wide token projections and the head's final projection (32 wide here, 2D = 32 of MAR-B's
// 1024) stay fp32. It checks the fused head's loop bodies hold what half_head.py promises (no
// float64 value, no norm written out as seven nodes, no AdaLN shift added per step (the final
// layer's, whose Gemm stays fp32, read from an fp32 stack of its own), each residual sum
// normalised by the SkipLayerNormalization
// that makes it, and no x0 clipping in this never-clipping pack), then
// compares the fp16 graphs and their emulation with the fp32 graphs, and guided images through
// the fused head token by token, rolled, unrolled and through the fixed-address runner.
func TestHalfPackMARLayout(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	pack, check := randomPack(t, "ci_target", ""), filepath.Join(t.TempDir(), "check")
	halfPack(t, pack, "--min-dim", "32", "--keep", "final_layer/linear", "--cpu-check", check)
	checkLoopBodies(t, pack, `
    doubles = [v.name for v in list(body.input) + list(body.output) if v.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE]
    doubles += [n.name or n.output[0] for n in body.node if n.op_type == "Cast" and n.attribute[0].i == onnx.TensorProto.DOUBLE]
    assert not doubles, (body.name, "float64:", doubles)
    norms = [n.name for n in body.node if n.op_type in ("ReduceMean", "Pow", "Sqrt")]
    assert not norms, (body.name, "a norm written out:", norms)
    made = {o: n for n in body.node for o in n.output}
    NORMS = ("LayerNormalization", "SkipLayerNormalization")
    def source(v):  # the node making v, through Casts
        n = made.get(v)
        return source(n.input[0]) if n is not None and n.op_type == "Cast" else n
    def strip(v):  # the value a chain of Casts starts from
        n = made.get(v)
        return strip(n.input[0]) if n is not None and n.op_type == "Cast" else v
    modulated = {n.output[0] for n in body.node if n.op_type == "Mul" and any(
        source(i) is not None and source(i).op_type in NORMS and source(i).output[0] == strip(i) for i in n.input)}
    shifts = [n.output[0] for n in body.node if n.op_type == "Add" and modulated & set(n.input)]
    assert not shifts, (body.name, "AdaLN shifts added per step:", shifts)
    own = [n.output[0] for n in body.node if n.op_type == "Gemm" and len(n.input) == 3
           and made.get(n.input[2]) is not None and made[n.input[2]].op_type == "Gather"]
    assert len(own) == 1, (body.name, "Gemms taking their shift from a stack of their own:", own, "want the final layer's (fp32)")
    apart = [n.output[0] for n in body.node if n.op_type == "LayerNormalization" and made.get(n.input[0]) is not None
             and made[n.input[0]].op_type == "Add"]
    assert not apart, (body.name, "residual sums normalised by a node of their own:", apart)
    skips = [n for n in body.node if n.op_type == "SkipLayerNormalization"]
    assert len(skips) == 2, (body.name, "SkipLayerNormalization nodes:", len(skips), "want 2 (second block, final layer)")
    clips = [n.op_type for n in body.node if n.op_type in ("Min", "Max")]
    assert not clips, (body.name, "x0 clipped per step in a pack that never clips:", clips)
`)
	man, err := mar.LoadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	spec := man.Precisions[mar.FP16]
	if spec.HeadLoop == "" || spec.Cached == "" {
		t.Fatalf("fp16 entry %+v lacks the fused head or the cached transformer", spec)
	}
	if !spec.HeadLoopNeverClips {
		t.Error("fp16 entry: want head_loop_never_clips on a pack that never clips x0 (its sampler ignores the clip input)")
	}
	var record struct {
		FP32Layers map[string][]string `json:"fp32_layers"`
	}
	if err := json.Unmarshal(spec.Quantization, &record); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(record.FP32Layers["transformer"], "/z_proj/MatMul") || !slices.Contains(record.FP32Layers["head"], "/net/final_layer/linear/Gemm") {
		t.Errorf("fp32 layers %v: want the 16-wide token projection and the head's final layer kept", record.FP32Layers)
	}
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	ref := openWithHeadLoop(t, pack, "on")
	zRef, outRef := runGraphs(t, ref)
	opt := mar.Options{Seed: 7, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, NumIter: 8, Steps: 50}
	want := generate(t, ref, opt)
	// the fused head also unrolled (what a GPU runs): the fp16 graph's casts in and out of the
	// float32 sampler must survive unroll_head.py and open in ONNX Runtime
	for _, dir := range []string{pack, check} {
		unrollHead(t, dir, 50)
	}
	if man, err = mar.LoadManifest(pack); err != nil {
		t.Fatal(err)
	}
	spec = man.Precisions[mar.FP16]
	fp16 := asOwnGraphs(t, pack, spec)
	for _, c := range []struct {
		name, dir          string
		unrolled, replayed bool
	}{
		{"fp16 graphs (CPU provider)", fp16, false, false},
		{"fp16 emulated (--cpu-check)", check, false, false},
		{"fp16 graphs unrolled (CPU provider)", fp16, true, false},
		{"fp16 emulated unrolled (--cpu-check)", check, true, false},
		// the fixed-address runner a CUDA graph replays (on the CPU: its copies, nothing
		// captured), every input bound: the clip input this graph no longer reads included
		{"fp16 graphs unrolled, fixed-address runner", fp16, true, true},
	} {
		t.Setenv("MARSPEC_HEAD_UNROLLED", map[bool]string{false: "off", true: "on"}[c.unrolled])
		t.Setenv("MARSPEC_CUDA_GRAPH", map[bool]string{false: "off", true: "on"}[c.replayed])
		m := openWithHeadLoop(t, c.dir, "on")
		if !c.unrolled {
			z, out := runGraphs(t, m)
			checkHalfRMS(t, c.name+": transformer z", z, zRef)
			checkHalfRMS(t, c.name+": head output", out, outRef)
		}
		before := onnxrt.ReadFixedStats()
		got := generate(t, m, opt)
		if runs := onnxrt.ReadFixedStats().Runs - before.Runs; runs != map[bool]int64{false: 0, true: int64(opt.NumIter)}[c.replayed] {
			t.Errorf("%s: %d fixed-address head runs, want one per AR step exactly when replayed", c.name, runs)
		}
		// the fused head against the per-step head of the same graphs: they differ only in the
		// sampler (float32 and one guidance MatMul inside the graph, float64 in Go)
		perStep := generate(t, openWithHeadLoop(t, c.dir, "off"), opt)
		for i := range perStep {
			rel := relRMS(got[i].Tokens, perStep[i].Tokens)
			t.Logf("%s: image %d, fused against per-step head: tokens relative RMS %.4f", c.name, i, rel)
			if rel > halfSamplerTolerance {
				t.Errorf("%s: image %d, fused against per-step head: tokens relative RMS %.4g, want under %g", c.name, i, rel, halfSamplerTolerance)
			}
		}
		if sessions := m.Head.(*mar.ONNXHead).UnrolledSessions(); (len(sessions) > 0) != c.unrolled {
			t.Errorf("%s: unrolled sessions %q", c.name, sessions)
		}
		for i := range want {
			rel := relRMS(got[i].Tokens, want[i].Tokens)
			t.Logf("%s: image %d tokens relative RMS %.4f", c.name, i, rel)
			if rel > halfTokenTolerance || rel < minRelRMS {
				t.Errorf("%s: image %d tokens relative RMS %.4g, want %g to %g", c.name, i, rel, minRelRMS, halfTokenTolerance)
			}
		}
	}
}

// halfPack runs scripts/packs/half_pack.py with args.
func halfPack(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(python, append([]string{tool("packs", "half_pack.py")}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("half_pack.py: %v\n%s", err, out)
	}
	t.Logf("half_pack.py %s:\n%s", strings.Join(args, " "), out)
}

// asOwnGraphs copies pack to a new folder whose own (fp32) graph files are the fp16 graphs of
// spec, so ONNX Runtime's CPU provider can be given them (marspec refuses fp16 on the CPU).
func asOwnGraphs(t *testing.T, pack string, spec mar.PrecisionSpec) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fp16-as-own")
	if out, err := exec.Command("cp", "-r", pack, dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	own := map[string]string{"transformer.onnx": spec.Transformer, "head.onnx": spec.Head,
		"head_loop.onnx": spec.HeadLoop, "transformer_cached.onnx": spec.Cached}
	for _, u := range spec.HeadLoopUnrolled { // head_loop.fp16.guided50.onnx -> head_loop.guided50.onnx
		own[strings.Replace(u.File, ".fp16.", ".", 1)] = u.File
	}
	for own, half := range own {
		if half == "" {
			continue
		}
		if err := os.Rename(filepath.Join(dir, half), filepath.Join(dir, own)); err != nil {
			t.Fatal(err)
		}
	}
	var man map[string]any
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(data, &man)
	}
	if err != nil {
		t.Fatal(err)
	}
	delete(man, "precisions")
	if data, err = json.Marshal(man); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func checkHalfRMS(t *testing.T, name string, got, ref []float32) {
	t.Helper()
	rel := relRMS(got, ref)
	t.Logf("%s: fp16 vs fp32 relative RMS difference %.5f", name, rel)
	if rel > halfGraphTolerance || rel < minRelRMS || math.IsNaN(rel) {
		t.Errorf("%s: fp16 vs fp32 relative RMS difference %.4g, want %g to %g", name, rel, minRelRMS, halfGraphTolerance)
	}
}

func generate(t *testing.T, m *mar.Model, opt mar.Options) []mar.Image {
	t.Helper()
	images, err := m.Generate([]int{1, 7}, opt)
	if err != nil {
		t.Fatal(err)
	}
	return images
}

func meanAbsPixelDiff(a, b []uint8) float64 {
	sum := 0.0
	for i := range a {
		sum += math.Abs(float64(a[i]) - float64(b[i]))
	}
	return sum / float64(len(a))
}

// TestHalfPackHeadStream converts the embedded target (a trained head) with --head-stream fp16:
// its head's input projection turns fp16 and with it the residual stream, so every LayerNorm in
// the fused head's loop bodies reads fp16, the manifest's scheme says so, and whole images of
// the emulation (per-step unguided; guided through the fused head with the cache) stay within
// halfImageTolerance of the fp32 images. (A random-weight head drives x_t past fp16's range:
// docs/gpu.md, "Half precision"; so this runs on a trained one.)
func TestHalfPackHeadStream(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	pack, check := filepath.Join(dir, "pack"), filepath.Join(dir, "check")
	halfPack(t, filepath.Join(repoRoot, "models", "target"), "--out", pack, "--head-stream", "fp16", "--cpu-check", check)
	man, err := mar.LoadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(man.Precisions[mar.FP16].Quantization), "residual stream fp16") {
		t.Errorf("fp16 scheme %s: want the head's residual stream named", man.Precisions[mar.FP16].Quantization)
	}
	checkLoopBodies(t, pack, `
    types = {v.name: v.type.tensor_type.elem_type for v in list(body.value_info) + list(body.input)}
    # a SkipLayerNormalization's sum is unknown to ONNX's inference: its skip input says the type
    norms = [n.input[0] for n in body.node if n.op_type == "LayerNormalization"]
    norms += [n.input[1] for n in body.node if n.op_type == "SkipLayerNormalization"]
    wide = [x for x in norms if types.get(x) != onnx.TensorProto.FLOAT16]
    assert norms and not wide, (body.name, "LayerNorm inputs not fp16:", wide)
`)
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	checkEmulatedImages(t, pack, check)
	// the fp16 graphs themselves, where ONNX Runtime's CPU provider has the kernels (its fp16
	// SkipLayerNormalization among them) and casts the rest up: they must open and stay close too
	checkEmulatedImages(t, pack, asOwnGraphs(t, pack, man.Precisions[mar.FP16]))
}

// checkEmulatedImages compares whole images of pack's fp32 graphs with those of check, the
// emulation of its fp16 graphs (half_pack.py --cpu-check): per-step unguided, and guided
// through the fused head with the cache, within halfImageTolerance and not identical.
func checkEmulatedImages(t *testing.T, pack, check string) {
	t.Helper()
	for _, c := range []struct {
		loop string
		opt  mar.Options
	}{
		{"off", mar.Options{Seed: 3, CFG: 1, Temperature: 1, NumIter: 8}},
		{"on", mar.Options{Seed: 5, CFG: 3, CFGSchedule: "linear", Temperature: 0.9, NumIter: 12,
			Cache: mar.CacheSettings{On: true, FullSteps: 3, RefreshEvery: 4, Recompute: 3, ReuseCFG: true}}},
	} {
		want := generate(t, openWithHeadLoop(t, pack, c.loop), c.opt)
		got := generate(t, openWithHeadLoop(t, check, c.loop), c.opt)
		for i := range want {
			d, rel := meanAbsPixelDiff(got[i].Pixels, want[i].Pixels), relRMS(got[i].Tokens, want[i].Tokens)
			t.Logf("head loop %s, cache %v, image %d: mean |pixel difference| %.3f grey levels, tokens relative RMS %.4f",
				c.loop, c.opt.Cache.On, i, d, rel)
			if d > halfImageTolerance || rel < minRelRMS || math.IsInf(rel, 1) {
				t.Errorf("head loop %s, cache %v, image %d: mean |pixel difference| %.3g, want under %g (tokens relative RMS %.3g: not identical, not NaN)",
					c.loop, c.opt.Cache.On, i, d, halfImageTolerance, rel)
			}
		}
	}
}

// checkLoopBodies runs check, Python statements indented into a loop over `body`, each loop
// body of pack's head_loop.fp16.onnx after ONNX's shape inference (value_info holds the
// types), asserting what the body must hold; it logs each body's node and Cast counts.
func checkLoopBodies(t *testing.T, pack, check string) {
	t.Helper()
	script := "import sys, onnx\nsys.path.insert(0, sys.argv[2])\nimport loop_weights\n" +
		"m = onnx.shape_inference.infer_shapes(onnx.load(sys.argv[1], load_external_data=False))\n" +
		"for body in loop_weights.loop_bodies(m):" + check +
		"    print(body.name, len(body.node), 'nodes,', sum(n.op_type == 'Cast' for n in body.node), 'Casts')\n"
	out, err := exec.Command(python, "-c", script, filepath.Join(pack, "head_loop.fp16.onnx"),
		filepath.Join(repoRoot, "scripts", "packs")).CombinedOutput()
	if err != nil {
		t.Fatalf("head_loop.fp16.onnx's loop bodies: %v\n%s", err, out)
	}
	t.Logf("head_loop.fp16.onnx:\n%s", out)
}
