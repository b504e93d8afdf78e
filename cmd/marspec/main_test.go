package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	if len(files) != 5 {
		t.Fatalf("want 4 images and a grid, got %v", files)
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
	broken := t.TempDir()
	for _, f := range []string{"manifest.json", "head.onnx"} {
		data, err := os.ReadFile(filepath.Join("../../models/target", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(broken, f), data, 0o644)
	}
	os.WriteFile(filepath.Join(broken, "transformer.onnx"), []byte("this is not an onnx model"), 0o644)
	out := t.TempDir()
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown class", nil, []string{"generate", "--class", "hat"}, `unknown class "hat"`},
		{"class out of range", nil, []string{"generate", "--class", "10"}, "class 10 out of range"},
		{"zero n", nil, []string{"generate", "--n", "0"}, "--n 0 out of range"},
		{"huge n", nil, []string{"generate", "--n", "100000000"}, "out of range"},
		{"missing pack", nil, []string{"generate", "--model", "/no/such/pack"}, "model pack /no/such/pack: no such folder"},
		{"corrupted onnx", nil, []string{"generate", "--model", broken, "--out", out}, "transformer.onnx: not a readable ONNX model"},
		{"missing runtime", []string{"MARSPEC_ORT_LIB=/no/such/libonnxruntime.so"}, []string{"generate", "--out", out}, "onnxruntime library /no/such/libonnxruntime.so not found"},
		{"bad cfg", nil, []string{"generate", "--cfg", "0.5", "--out", out}, "cfg 0.5 out of range"},
		{"unknown command", nil, []string{"paint"}, `unknown command "paint"`},
		{"bad gamma", nil, []string{"generate", "--gamma", "many", "--out", out}, `gamma "many" is not a number`},
		{"gamma zero", nil, []string{"generate", "--gamma", "0", "--out", out}, "gamma 0 out of range"},
		{"bad verify", nil, []string{"generate", "--verify", "all", "--out", out}, `verify "all" unknown`},
		{"bad schedule", nil, []string{"generate", "--schedule", "eager", "--out", out}, `schedule "eager" unknown (allowed: auto, batched, lazy)`},
		{"bad prefill", nil, []string{"generate", "--prefill", "1.5", "--out", out}, "prefill 1.5 out of range"},
		{"bad mode", nil, []string{"generate", "--mode", "fast", "--out", out}, `mode "fast" unknown`},
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
			if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || strings.Contains(stderr, "panic") {
				t.Fatalf("want a one-line error, got %q", stderr)
			}
		})
	}
}

func TestModelsListsClasses(t *testing.T) {
	out, stderr, code := marspec(t, nil, "models")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"fmnist-target", "fmnist-draft", "7=Sneaker", "9=Ankle boot"} {
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
