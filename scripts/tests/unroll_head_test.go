package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"marspec/bench"
	"marspec/diffusion"
	"marspec/generation"
	"marspec/mar"
	"marspec/onnxrt"
)

// TestUnrolledHeadOnMARLayout: unroll_head.py gives a pack of MAR-B's layout (ci_target) its
// fused head unrolled for 25 and 100 steps, fp32 and int8, guided and unguided, and the head
// samples through those graphs what it samples through the per-step head: every denoiser case
// of TestFusedHeadOnMARLayout (5 rows, run in sessions of 8: padded rows must not touch real
// ones), and whole images at 100 steps. The unrolled sessions must be the ones that ran.
func TestUnrolledHeadOnMARLayout(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(python, args...)
		cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", filepath.Base(args[0]), err, out)
		}
	}
	pack := randomPack(t, "ci_target", "")
	run(tool("packs", "quantize_pack.py"), pack)
	unrollHead(t, pack, 25, 100)
	man, err := mar.LoadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	want := []mar.UnrolledLoop{{File: "head_loop.guided25.onnx", Steps: 25, Guided: true}, {File: "head_loop.unguided25.onnx", Steps: 25},
		{File: "head_loop.guided100.onnx", Steps: 100, Guided: true}, {File: "head_loop.unguided100.onnx", Steps: 100}}
	if !slices.Equal(man.HeadLoop.Unrolled, want) {
		t.Fatalf("manifest head_loop.unrolled %+v, want %+v", man.HeadLoop.Unrolled, want)
	}
	if got := man.Precisions[mar.Int8].HeadLoopUnrolled; len(got) != 4 || got[0].File != "head_loop.int8.guided25.onnx" {
		t.Fatalf("manifest precisions.int8.head_loop_unrolled %+v, want the int8 head loop unrolled for 25 and 100 steps", got)
	}
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MARSPEC_HEAD_UNROLLED", "on")
	unrolled := openWithHeadLoop(t, pack, "on")
	compareDenoisers(t, unrolled)
	opened := unrolled.Head.(*mar.ONNXHead).UnrolledSessions()
	wantOpened := []string{"head_loop.guided100.onnx (8 rows)", "head_loop.guided25.onnx (8 rows)",
		"head_loop.unguided100.onnx (8 rows)", "head_loop.unguided25.onnx (8 rows)"}
	if !slices.Equal(opened, wantOpened) {
		t.Fatalf("unrolled sessions opened: %q, want %q", opened, wantOpened)
	}
	t.Setenv("MARSPEC_HEAD_UNROLLED", "off")
	compareImages(t, unrolled, openWithHeadLoop(t, pack, "off"))

	// PrepareUnrolled opens what a generation then calls, and nothing more: 2 images at
	// num_iter 16 decode 2 x StepSizes tokens per AR step, in sessions of the next power of two.
	t.Setenv("MARSPEC_HEAD_UNROLLED", "on")
	fresh := openWithHeadLoop(t, pack, "on")
	opt := mar.Options{Seed: 5, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, NumIter: 16, Steps: 100}
	if err := fresh.PrepareUnrolled(opt, 2); err != nil {
		t.Fatal(err)
	}
	prepared := fresh.Head.(*mar.ONNXHead).UnrolledSessions()
	var wantRows []string
	for _, size := range mar.StepSizes(fresh.Manifest.SeqLen(), 16) {
		rows := 1
		for rows < 2*size {
			rows *= 2
		}
		if name := fmt.Sprintf("head_loop.guided100.onnx (%d rows)", rows); !slices.Contains(wantRows, name) {
			wantRows = append(wantRows, name)
		}
	}
	slices.Sort(wantRows)
	if !slices.Equal(prepared, wantRows) {
		t.Fatalf("PrepareUnrolled opened %q, want %q", prepared, wantRows)
	}
	if _, err := fresh.Generate([]int{1, 207}, opt); err != nil {
		t.Fatal(err)
	}
	if after := fresh.Head.(*mar.ONNXHead).UnrolledSessions(); !slices.Equal(after, prepared) {
		t.Fatalf("generating after PrepareUnrolled opened more sessions: %q, prepared %q", after, prepared)
	}

	t.Setenv("MARSPEC_HEAD_UNROLLED", "on")
	t.Setenv("MARSPEC_HEAD_LOOP", "on")
	int8Unrolled := openAt(t, pack, mar.Int8)
	t.Cleanup(func() { int8Unrolled.Head.(*mar.ONNXHead).Close() })
	compareDenoisers(t, int8Unrolled)
	if got := int8Unrolled.Head.(*mar.ONNXHead).UnrolledSessions(); len(got) != 4 || got[0] != "head_loop.int8.guided100.onnx (8 rows)" {
		t.Fatalf("int8 unrolled sessions opened: %q, want the four int8 graphs at 8 rows", got)
	}
	// A server (--max-batch 3) opens at start the sessions its default requests call (the
	// pack's paper preset: guided, 100 steps, one token per AR step per image), at every
	// batch up to 3: so requests of 1 to 3 images open nothing more.
	models := &generation.ORTModels{ORTLib: lib, Provider: "cpu", Threads: 1, PrepareImages: 3}
	served, err := models.Model(pack, "")
	if err != nil {
		t.Fatal(err)
	}
	atStart := served.Head.(*mar.ONNXHead).UnrolledSessions()
	wantStart := []string{"head_loop.guided100.onnx (1 rows)", "head_loop.guided100.onnx (2 rows)", "head_loop.guided100.onnx (4 rows)"}
	if !slices.Equal(atStart, wantStart) {
		t.Fatalf("a server opened %q at start, want %q", atStart, wantStart)
	}
	d, err := generation.ResolvedDefaults(served.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	defaults := mar.Options{Seed: 1, NumIter: d.NumIter, Steps: d.Steps, Sampler: diffusion.Sampler(d.Sampler), CFG: d.CFG,
		CFGSchedule: d.CFGSchedule, Temperature: d.Temperature}
	for _, classes := range [][]int{{3}, {3, 4}, {3, 4, 5}} {
		if _, err := served.Generate(classes, defaults); err != nil {
			t.Fatal(err)
		}
	}
	if after := served.Head.(*mar.ONNXHead).UnrolledSessions(); !slices.Equal(after, atStart) {
		t.Fatalf("requests after the server's start opened more sessions: %q, at start %q", after, atStart)
	}

	// bench --parts on a GPU warms up with the whole batch: the sessions of the timed round
	// and no others (one warm-up image would open its own row counts)
	benched := openWithHeadLoop(t, pack, "on")
	report, err := bench.Parts(benched, bench.PartsSettings{Images: 2, Batch: 2, NumIter: 16, Steps: 100, Rounds: 1, CFG: 2.9,
		FusedHead: true, WarmAll: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(report.UnrolledSessions, prepared) {
		t.Fatalf("bench --parts warmed up into sessions %q, want the timed round's %q", report.UnrolledSessions, prepared)
	}
}

// TestUnrolledHeadEmbeddedInt8: the embedded target's int8 fused head reads a weight in its
// outer graph and in its loop bodies both (loop_weights.py keeps one there too), which
// unroll_head.py once wrote twice into the unrolled graph (a name ONNX refuses twice). Unrolled
// for its 50 steps, its int8 images are the rolled loop's, token for token.
func TestUnrolledHeadEmbeddedInt8(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	pack := filepath.Join(t.TempDir(), "target")
	copyTree(t, filepath.Join(repoRoot, "models", "target"), pack)
	unrollHead(t, pack, 50)
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	opt := mar.Options{Seed: 9, CFG: 3, CFGSchedule: "linear", Temperature: 1, NumIter: 6, Steps: 50}
	t.Setenv("MARSPEC_HEAD_LOOP", "on")
	images := map[string][]mar.Image{}
	for _, unrolled := range []string{"off", "on"} {
		t.Setenv("MARSPEC_HEAD_UNROLLED", unrolled)
		m := openAt(t, pack, mar.Int8)
		t.Cleanup(func() { m.Head.(*mar.ONNXHead).Close() })
		images[unrolled] = generate(t, m, opt)
		if sessions := m.Head.(*mar.ONNXHead).UnrolledSessions(); (len(sessions) > 0) != (unrolled == "on") {
			t.Fatalf("unrolled %s: sessions %q", unrolled, sessions)
		}
	}
	for i := range images["off"] {
		if !slices.Equal(images["on"][i].Tokens, images["off"][i].Tokens) {
			t.Errorf("image %d: the unrolled int8 head's tokens differ from the rolled loop's", i)
		}
	}
}

// unrollHead runs scripts/packs/unroll_head.py on pack for each of steps.
func unrollHead(t *testing.T, pack string, steps ...int) {
	t.Helper()
	args := []string{tool("packs", "unroll_head.py"), pack}
	for _, s := range steps {
		args = append(args, "--steps", strconv.Itoa(s))
	}
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("unroll_head.py %s: %v\n%s", pack, err, out)
	}
}
