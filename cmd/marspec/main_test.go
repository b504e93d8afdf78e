package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"marspec/generation"
	"marspec/render"
)

// The tests run the real command: the test binary re-executes itself as marspec.
func TestMain(m *testing.M) {
	if os.Getenv("MARSPEC_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func marspec(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "MARSPEC_RUN_MAIN=1", "MARSPEC_ORT_LIB="+ortLib(t)), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func ortLib(t *testing.T) string {
	p, err := filepath.Abs("../../third_party/onnxruntime/libonnxruntime.so")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if _, stderr, code := marspec(t, nil, "generate", "--model", "target", "--class", "7", "--n", "4", "--seed", "1", "--out", dir); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(a, "*.png"))
	if len(files) != 4 {
		t.Fatalf("want 4 images, got %v", files)
	}
	if _, err := os.Stat(a + "-grid.png"); err != nil {
		t.Fatalf("no grid next to the folder: %v", err)
	}
	for _, f := range files {
		x, _ := os.ReadFile(f)
		y, err := os.ReadFile(filepath.Join(b, filepath.Base(f)))
		if err != nil || !bytes.Equal(x, y) {
			t.Fatalf("%s differs between two runs with the same seed", filepath.Base(f))
		}
	}
	// a different batch size gives the same images; a different seed different ones
	c, d := t.TempDir(), t.TempDir()
	marspec(t, nil, "generate", "--model", "target", "--class", "sneaker", "--n", "4", "--seed", "1", "--batch", "3", "--out", c)
	marspec(t, nil, "generate", "--model", "target", "--class", "7", "--n", "4", "--seed", "2", "--out", d)
	x, _ := os.ReadFile(filepath.Join(a, "0002_class7_sneaker.png"))
	y, _ := os.ReadFile(filepath.Join(c, "0002_class7_sneaker.png"))
	z, _ := os.ReadFile(filepath.Join(d, "0002_class7_sneaker.png"))
	if !bytes.Equal(x, y) {
		t.Fatal("batch size changed an image")
	}
	if bytes.Equal(x, z) {
		t.Fatal("seeds 1 and 2 gave the same image")
	}
}

func TestBadInputGivesOneLineError(t *testing.T) {
	// the target pack with every graph but the transformer intact (optional graphs such as the
	// early exit are read when the pack is opened, so they are copied too); at fp32 its
	// transformer's passes come from the cached graph, so that is the one broken
	broken := t.TempDir()
	packFiles, err := os.ReadDir("../../models/target")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range packFiles {
		if e.Name() == "transformer_cached.onnx" || e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("../../models/target", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(broken, e.Name()), data, 0o644)
	}
	os.WriteFile(filepath.Join(broken, "transformer_cached.onnx"), []byte("this is not an onnx model"), 0o644)
	out := t.TempDir()
	// a run into a folder that does not exist yet: a refused run must not leave it behind
	fresh := filepath.Join(t.TempDir(), "new", "run")
	aFile := filepath.Join(t.TempDir(), "file")
	os.WriteFile(aFile, []byte("x"), 0o644)
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown class", nil, []string{"generate", "--class", "hat"}, `class "hat": unknown`},
		{"class out of range", nil, []string{"generate", "--class", "10"}, "class 10: out of range"},
		{"zero n", nil, []string{"generate", "--n", "0"}, "n 0: out of range"},
		{"huge n", nil, []string{"generate", "--n", "100000000"}, "out of range"},
		{"missing pack", nil, []string{"generate", "--model", "/no/such/pack"}, "model pack /no/such/pack: no such folder"},
		{"corrupted onnx", nil, []string{"generate", "--model", broken, "--out", out}, "transformer_cached.onnx: not a readable ONNX model"},
		{"corrupted onnx, new folder", nil, []string{"generate", "--model", broken, "--out", fresh}, "transformer_cached.onnx: not a readable ONNX model"},
		{"missing runtime", []string{"MARSPEC_ORT_LIB=/no/such/libonnxruntime.so"}, []string{"generate", "--out", out}, "onnxruntime library /no/such/libonnxruntime.so not found"},
		{"missing runtime, new folder", []string{"MARSPEC_ORT_LIB=/no/such/libonnxruntime.so"}, []string{"generate", "--mode", "spec", "--out", fresh, "--heatmap", filepath.Join(fresh+"-maps", "h.png")}, "onnxruntime library /no/such/libonnxruntime.so not found"},
		{"cuda on the CPU build, new folder", nil, []string{"generate", "--device", "cuda", "--out", fresh}, "cuda"},
		{"unreachable server, new folder", nil, []string{"generate", "--server", "http://127.0.0.1:1", "--out", fresh}, "cannot reach a marspec server at http://127.0.0.1:1"},
		{"bad cfg", nil, []string{"generate", "--cfg", "0.5", "--out", out}, "cfg 0.5: out of range"},
		{"unknown command", nil, []string{"paint"}, `unknown command "paint"`},
		{"bad gamma", nil, []string{"generate", "--gamma", "many", "--out", out}, `gamma "many": not a whole number`},
		{"gamma zero", nil, []string{"generate", "--gamma", "0", "--out", out}, "gamma 0: out of range"},
		{"bad verify", nil, []string{"generate", "--verify", "all", "--out", out}, `verify "all": unknown`},
		{"bad schedule", nil, []string{"generate", "--schedule", "eager", "--out", out}, `schedule "eager": unknown (allowed: auto, batched, lazy)`},
		{"bad prefill", nil, []string{"generate", "--prefill", "1.5", "--out", out}, "prefill 1.5: out of range"},
		{"bad mode", nil, []string{"generate", "--mode", "fast", "--out", out}, `mode "fast": unknown`},
		// defects once found by trying bad values: each of these ran (exit 0, or failed only after generating) before
		{"cfg NaN", nil, []string{"generate", "--cfg", "nan", "--out", out}, "cfg NaN: out of range"},
		{"temperature 0", nil, []string{"generate", "--temperature", "0", "--out", out}, "temperature 0: out of range"},
		{"temperature NaN", nil, []string{"generate", "--temperature", "NaN", "--out", out}, "temperature NaN: out of range"},
		{"threads -2", nil, []string{"generate", "--threads", "-2", "--out", out}, "threads -2: out of range"},
		{"models threads -2", nil, []string{"models", "--threads", "-2"}, "threads -2: out of range"},
		{"fid threads -2", nil, []string{"fid", "--threads", "-2", out, out}, "threads -2: out of range"},
		{"bench threads -2", nil, []string{"bench", "--threads", "-2"}, "threads -2: out of range"},
		{"max resample tries 0", nil, []string{"generate", "--max-resample-tries", "0", "--out", out}, "max_resample_tries 0: out of range"},
		{"heatmap of a target-only run", nil, []string{"generate", "--model", "target", "--heatmap", filepath.Join(out, "h.png"), "--out", out}, "no acceptance map"},
		{"heatmap under a file", nil, []string{"generate", "--mode", "spec", "--heatmap", filepath.Join(aFile, "h.png"), "--out", out}, aFile + " is a file, not a folder"},
		{"grid under a file", nil, []string{"generate", "--grid", filepath.Join(aFile, "sub", "g.png"), "--out", fresh}, aFile + " is a file, not a folder"},
		{"self-draft without a draft mode", nil, []string{"generate", "--mode", "draft", "--draft", "self", "--out", out}, "draft"},
		{"unknown flag", nil, []string{"generate", "--bogus"}, "flag provided but not defined: -bogus (marspec generate -h lists the flags)"},
		{"stray argument", nil, []string{"generate", "7"}, `unexpected argument "7"`},
		{"preset", nil, []string{"generate", "--preset", "turbo"}, `preset "turbo": not a preset of pack target (allowed: balanced, exact, fast, quality)`},
		{"model with another mode", nil, []string{"generate", "--model", "target", "--mode", "draft"}, "model target: runs one pack alone (mode target)"},
		{"eval cfg NaN", nil, []string{"eval", "--cfg", "nan", "--out", filepath.Join(out, "run")}, "cfg NaN: out of range"},
		{"eval temperature 0", nil, []string{"eval", "--temperature", "0", "--out", filepath.Join(out, "run")}, "temperature 0: out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := marspec(t, c.env, c.args...)
			if code == 0 {
				t.Fatalf("exit code 0, want an error")
			}
			if !strings.Contains(stderr, c.want) {
				t.Fatalf("stderr %q does not say %q", stderr, c.want)
			}
			msg := stderr
			if strings.HasPrefix(msg, "opening ") { // a pack that fails to open said it began
				_, msg, _ = strings.Cut(msg, "\n")
			}
			if strings.Count(strings.TrimSpace(msg), "\n") != 0 || strings.Contains(stderr, "panic") {
				t.Fatalf("want a one-line error, got %q", stderr)
			}
			// refused before anything was generated, and nothing made is left behind
			if files, _ := filepath.Glob(filepath.Join(out, "*")); len(files) > 0 {
				t.Fatalf("a refused command wrote %v", files)
			}
			if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
				t.Fatalf("a refused command left %s behind", filepath.Dir(fresh))
			}
			if _, err := os.Stat(fresh + "-maps"); !os.IsNotExist(err) {
				t.Fatalf("a refused command left %s-maps behind", fresh)
			}
		})
	}
}

func TestModelsListsClasses(t *testing.T) {
	out, stderr, code := marspec(t, nil, "models")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// each pack's defaults and presets with their provenance: the target's from its manifest,
	// the draft's (none in its manifest) derived and saying so
	for _, want := range []string{"fmnist-target", "fmnist-draft", "7=Sneaker", "9=Ankle boot",
		"defaults: num_iter 49, ddpm in 50 steps, cfg 1 (linear), temperature 1 [chosen: ",
		"preset fast (default): target alone, 3 AR steps, distilled in 1 step, temperature 0.85, int8 weights on a CPU", "[measured: frontier runs docs/results/2026-11-27-int8-per-row/cfg1-seed1",
		"precisions: fp32, int8 (--precision, or a request's precision)",
		"settings: none in the manifest; derived from the embedded pack's"} {
		if !strings.Contains(out, want) {
			t.Fatalf("models output lacks %q:\n%s", want, out)
		}
	}
}

func TestSpecJSONAndIdenticalDraft(t *testing.T) {
	out, stderr, code := marspec(t, nil, "generate", "--class", "3", "--n", "2", "--gamma", "4", "--json", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var stats map[string]any
	if err := json.Unmarshal([]byte(out), &stats); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, out)
	}
	for _, key := range []string{"alpha", "target_forwards", "draft_forwards", "seconds", "accepted_at_pos"} {
		if _, ok := stats[key]; !ok {
			t.Fatalf("--json output lacks %q", key)
		}
	}
	// the target as its own draft under the exact criterion accepts every draft
	out, stderr, code = marspec(t, nil, "generate", "--draft", "target", "--acceptance", "exact", "--class", "0", "--n", "2", "--json", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	stats = nil
	if err := json.Unmarshal([]byte(out), &stats); err != nil {
		t.Fatal(err)
	}
	if stats["alpha"] != 1.0 || stats["drafted"].(float64) == 0 {
		t.Fatalf("identical draft: alpha %v over %v drafts, want 1", stats["alpha"], stats["drafted"])
	}
}

// bench --spec lays out prefix rounds both ways: the lazy schedule reads one target row per
// token and, making the same images, reports the same alpha as the batched one.
func TestBenchSpecComparesSchedules(t *testing.T) {
	out, stderr, code := marspec(t, nil, "bench", "--spec", "--steps", "5", "--gammas", "3", "--prefills", "0.05",
		"--verifies", "prefix", "--acceptances", "exact", "--batches", "2", "--spec-images", "4", "--ablation-gamma", "2")
	if code != 0 {
		t.Fatalf("bench --spec: %s", stderr)
	}
	cells := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "|")
		if len(f) == 14 && strings.TrimSpace(f[3]) == "prefix" {
			for i := range f {
				f[i] = strings.TrimSpace(f[i])
			}
			cells[f[4]] = f
		}
	}
	b, l := cells["batched"], cells["lazy"]
	if b == nil || l == nil {
		t.Fatalf("want a batched and a lazy prefix row:\n%s", out)
	}
	if l[9] != "1.00" || b[9] == "1.00" {
		t.Errorf("target rows per token: lazy %s (want 1.00), batched %s (want more)", l[9], b[9])
	}
	if l[7] != b[7] {
		t.Errorf("alpha differs between schedules: batched %s, lazy %s", b[7], l[7])
	}
}

// -h is a request for help: the flags on stdout, exit 0 (it exited 1 with the list on stderr).
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"generate", "-h"}, {"models", "--help"}, {"bench", "-h"}} {
		out, stderr, code := marspec(t, nil, args...)
		if code != 0 || !strings.Contains(out, "usage") || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
}

// --model draft runs the draft pack alone and says so in its output and in every PNG (it said
// "target mode"); class slugs as used in file names are class names too; a second run into the
// same folder is refused, and --overwrite replaces the earlier images; the grid lies outside
// the folder, which fid then scores.
func TestDraftModeSlugsAndOutputFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	gen := func(extra ...string) (string, string, int) {
		return marspec(t, nil, append([]string{"generate", "--model", "draft", "--class", "t-shirt-top,ankle-boot", "--n", "2",
			"--steps", "2", "--num-iter", "4", "--out", dir}, extra...)...)
	}
	out, stderr, code := gen()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(out, "draft mode (fmnist-draft)") {
		t.Fatalf("output %q does not say draft mode", out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "0003_class9_ankle-boot.png"))
	if err != nil {
		t.Fatal(err)
	}
	if p := render.ReadParameters(data); !strings.Contains(p, "mode=draft pack=draft") || strings.Contains(p, "target") {
		t.Fatalf("PNG parameters %q", p)
	}
	if _, err := os.Stat(dir + "-grid.png"); err != nil {
		t.Fatalf("no grid next to the folder: %v", err)
	}
	if _, stderr, code = gen(); code == 0 || !strings.Contains(stderr, "out "+dir+": holds 4 files") {
		t.Fatalf("a second run into the folder: exit %d, %q", code, stderr)
	}
	os.WriteFile(filepath.Join(dir, "0099_class0_t-shirt-top.png"), []byte("stale"), 0o644)
	if _, stderr, code = gen("--class", "3", "--overwrite"); code != 0 {
		t.Fatalf("--overwrite: exit %d: %s", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 2 || filepath.Base(files[0]) != "0000_class3_dress.png" {
		t.Fatalf("after --overwrite the folder holds %v, want the new image only", files)
	}
	if out, stderr, code := marspec(t, nil, "fid", dir, dir); code != 0 || !strings.Contains(out, "FID") {
		t.Fatalf("fid on the output folder: exit %d, %s %s", code, out, stderr)
	}
}

// models opens every pack's graphs: a truncated ONNX file is reported broken (it was listed as
// fine), and the command fails.
func TestModelsReportsTruncatedGraph(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"manifest.json", "head.onnx", "head_loop.onnx", "transformer.onnx"} {
		data, err := os.ReadFile(filepath.Join("../../models/target", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "transformer.onnx" {
			data = data[:len(data)/2]
		}
		os.WriteFile(filepath.Join(dir, f), data, 0o644)
	}
	out, stderr, code := marspec(t, nil, "models", "draft", dir)
	if code == 0 || !strings.Contains(out, "BROKEN") || !strings.Contains(stderr, "1 of 2 model packs cannot run: "+dir) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	if !strings.Contains(out, "graphs: load in ONNX Runtime") {
		t.Fatalf("the good pack is not reported as checked:\n%s", out)
	}
}

// A bad value in a bench list fails before anything is measured (it failed after minutes).
func TestBenchChecksListsFirst(t *testing.T) {
	out, stderr, code := marspec(t, nil, "bench", "--spec", "--gammas", "4,abc", "--steps", "2", "--batches", "1", "--spec-images", "1")
	if code == 0 || !strings.Contains(stderr, `gamma "abc"`) || strings.Contains(out, "| 1 |") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
}

// --preset applies a preset, and only flags given on the command line override it (flag
// defaults do not).
func TestGeneratePreset(t *testing.T) {
	params := func(args ...string) string {
		t.Helper()
		out, stderr, code := marspec(t, nil, append([]string{"generate", "--class", "0", "--steps", "2", "--json", "--out", t.TempDir()}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var got struct{ Params string }
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		return got.Params
	}
	name := ""
	set := generation.EmbeddedSettings()
	for _, n := range set.PresetNames() {
		if p := set.Presets[n]; p.Mode == generation.ModeTarget && p.NumIter > 3 {
			name = n
			break
		}
	}
	if name == "" {
		t.Skip("no target-mode preset with fewer AR steps")
	}
	if p := params("--preset", name); !strings.Contains(p, "mode=target preset="+name) || !strings.Contains(p, fmt.Sprintf("num_iter=%d ", set.Presets[name].NumIter)) {
		t.Errorf("--preset %s: %s", name, p)
	}
	if p := params("--preset", name, "--num-iter", "3"); !strings.Contains(p, "num_iter=3 ") {
		t.Errorf("--preset %s --num-iter 3: %s", name, p)
	}
}

func TestFlagsMayFollowArguments(t *testing.T) {
	fs := flag.NewFlagSet("fid", flag.ContinueOnError)
	quiet := fs.Bool("quiet", false, "")
	out := fs.String("o", "", "")
	if err := parseFlags(fs, []string{"A", "--quiet", "B", "-o", "x.json"}); err != nil {
		t.Fatal(err)
	}
	if !*quiet || *out != "x.json" || !slices.Equal(fs.Args(), []string{"A", "B"}) {
		t.Fatalf("quiet %v, o %q, arguments %q", *quiet, *out, fs.Args())
	}
	fs = flag.NewFlagSet("fid", flag.ContinueOnError)
	quiet = fs.Bool("quiet", false, "")
	if err := parseFlags(fs, []string{"A", "--", "--quiet"}); err != nil {
		t.Fatal(err)
	}
	if *quiet || !slices.Equal(fs.Args(), []string{"A", "--quiet"}) {
		t.Fatalf("after --: quiet %v, arguments %q", *quiet, fs.Args())
	}
}

// models lists a pack's classes as the first few and a count, unless --classes asks for all;
// each pack says what an image costs here under its default and which presets are faster.
func TestModelsShortClassListAndCost(t *testing.T) {
	dir := t.TempDir()
	entries, err := os.ReadDir("../../models/target")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("../../models/target", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "manifest.json" {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			names := make([]string, 25)
			for i := range names {
				names[i] = fmt.Sprintf("name%d", i)
			}
			m["classes"] = names
			if data, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code := marspec(t, nil, "models", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "  classes (25): 0=name0, 1=name1, 2=name2, 3=name3, 4=name4, 5=name5, 6=name6, 7=name7, 8=name8, 9=name9, ... and 15 more; --classes to list all\n"; !strings.Contains(out, want) {
		t.Errorf("models output lacks the short list %q:\n%s", want, out)
	}
	if !strings.Contains(out, "  cost here: about ") || !strings.Contains(out, " per image for the default, preset fast") ||
		!strings.Contains(out, ": an estimate from one unguided transformer pass (") {
		t.Errorf("models output lacks the cost here:\n%s", out)
	}
	out, stderr, code = marspec(t, nil, "models", "--classes", dir)
	if code != 0 {
		t.Fatalf("--classes: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, ", 23=name23, 24=name24\n") || strings.Contains(out, "more; --classes") {
		t.Errorf("--classes does not list every class:\n%s", out)
	}
}
