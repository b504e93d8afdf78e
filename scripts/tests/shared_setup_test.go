package tests

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Making a random pack of MAR-B's layout (make_random_packs.py exports every graph) costs tens
// of seconds on a CI machine, and linking marspec several more, so a `go test` process makes
// each once, when a test first asks, in a folder TestMain removes. Each test works on its own
// copy of a pack, free to write into it, and still runs alone under -run.
var shared struct {
	mu   sync.Mutex
	dir  string
	err  error
	made map[string]*sharedResult
}

type sharedResult struct {
	once sync.Once
	dir  string // the folder the result is made in
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// sharedOnce calls build once per process for key, with an empty folder of its own, and gives
// every caller its result (a failure fails each of them).
func sharedOnce(t *testing.T, key string, build func(dir string) (string, error)) string {
	t.Helper()
	shared.mu.Lock()
	if shared.dir == "" && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "marspec-scripts-tests-")
		shared.made = map[string]*sharedResult{}
	}
	if shared.err != nil {
		shared.mu.Unlock()
		t.Fatal(shared.err)
	}
	r := shared.made[key]
	if r == nil {
		r = &sharedResult{dir: filepath.Join(shared.dir, strconv.Itoa(len(shared.made)))}
		shared.made[key] = r
	}
	shared.mu.Unlock()
	r.once.Do(func() {
		if r.err = os.Mkdir(r.dir, 0o755); r.err == nil {
			r.path, r.err = build(r.dir)
		}
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.path
}

// randomPackSeeds are the seeds `make_random_packs.py --models ci_target,ci_draft` gives the
// models (--seed plus the model's place in the list), so a pack made alone has the weights it
// has when made beside the other.
var randomPackSeeds = map[string]int{"ci_target": 0, "ci_draft": 1}

// randomPack returns a copy, in a temporary folder of the test's, of the pack
// `make_random_packs.py --models MODEL --vae ci_kl16 [--settings-of SIZE]` makes (settingsOf ""
// for the model's own settings), in a folder of the name make_random_packs.py gives it.
func randomPack(t *testing.T, model, settingsOf string) string {
	t.Helper()
	seed, ok := randomPackSeeds[model]
	if !ok {
		t.Fatalf("randomPack: no seed known for model %s", model)
	}
	made := sharedOnce(t, "pack "+model+" "+settingsOf, func(dir string) (string, error) {
		args := []string{tool("packs", "make_random_packs.py"), "--models", model, "--vae", "ci_kl16",
			"--seed", strconv.Itoa(seed), "--out", dir}
		if settingsOf != "" {
			args = append(args, "--settings-of", settingsOf)
		}
		cmd := exec.Command(python, args...)
		cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("make_random_packs.py %s: %v\n%s", strings.Join(args[1:], " "), err, out)
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 1 {
			return "", fmt.Errorf("make_random_packs.py left %d entries in %s (%v), want one pack", len(entries), dir, err)
		}
		return filepath.Join(dir, entries[0].Name()), nil
	})
	pack := filepath.Join(t.TempDir(), filepath.Base(made))
	copyTree(t, made, pack)
	return pack
}

// buildMarspec returns the marspec binary, built once per process (the tests only run it).
func buildMarspec(t *testing.T) string {
	t.Helper()
	return sharedOnce(t, "marspec binary", func(dir string) (string, error) {
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		bin := filepath.Join(dir, "marspec")
		if out, err := exec.Command(gobin, "build", "-o", bin, "marspec/cmd/marspec").CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build: %v\n%s", err, out)
		}
		return bin, nil
	})
}

// copyTree copies the regular files of a flat pack folder.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			t.Fatalf("%s: %s is not a plain file", src, e.Name())
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}
