package mar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// needRuntime loads the repository's copy of ONNX Runtime, skipping the test when
// scripts/setup_ort.sh (make setup) has not fetched it yet.
func needRuntime(t *testing.T) {
	t.Helper()
	lib := filepath.Join("..", DefaultORTLib)
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("%s is absent: run `make setup` (bash scripts/setup_ort.sh) to run this test", lib)
	}
	if err := InitRuntime(lib); err != nil {
		t.Fatal(err)
	}
}

func TestMissingRuntimeLibrary(t *testing.T) {
	if _, err := findORTLib("/no/such/lib.so"); err == nil || !strings.Contains(err.Error(), "/no/such/lib.so not found (given by --ort-lib)") {
		t.Fatalf("explicit path: %v", err)
	}
	t.Setenv("MARSPEC_ORT_LIB", "/no/env/lib.so")
	if _, err := findORTLib(""); err == nil || !strings.Contains(err.Error(), "/no/env/lib.so not found (given by MARSPEC_ORT_LIB)") {
		t.Fatalf("environment: %v", err)
	}
	t.Setenv("MARSPEC_ORT_LIB", "")
	t.Chdir(t.TempDir()) // no third_party here, nor beside the test binary
	_, err := findORTLib("")
	if err == nil {
		t.Fatal("found a library in an empty folder")
	}
	msg := err.Error()
	for _, want := range []string{"onnxruntime library not found (tried: " + DefaultORTLib, `run "make setup"`, "--ort-lib", "MARSPEC_ORT_LIB"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
}

func TestRuntimeLookupOrder(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, DefaultORTLib)
	os.MkdirAll(filepath.Dir(lib), 0o755)
	os.WriteFile(lib, nil, 0o644)
	env := filepath.Join(dir, "env.so")
	os.WriteFile(env, nil, 0o644)
	t.Chdir(dir)
	t.Setenv("MARSPEC_ORT_LIB", "")
	if got, err := findORTLib(""); err != nil || got != DefaultORTLib {
		t.Errorf("working directory: %q, %v", got, err)
	}
	t.Setenv("MARSPEC_ORT_LIB", env)
	if got, err := findORTLib(""); err != nil || got != env {
		t.Errorf("environment before working directory: %q, %v", got, err)
	}
	if got, err := findORTLib(lib); err != nil || got != lib {
		t.Errorf("explicit path before environment: %q, %v", got, err)
	}
}

func TestInitRuntimeTwice(t *testing.T) {
	needRuntime(t)
	// once initialised, later calls (with any path) are no-ops
	if err := InitRuntime(""); err != nil {
		t.Fatal(err)
	}
	if err := InitRuntime("/no/such/lib.so"); err != nil {
		t.Fatal(err)
	}
}

func TestProviders(t *testing.T) {
	needRuntime(t)
	so, err := newSessionOptions(SessionOptions{Provider: ProviderCUDA})
	if err == nil {
		so.Destroy()
		t.Log("CUDA execution provider available")
	} else if msg := err.Error(); !strings.HasPrefix(msg, "cuda execution provider unavailable") || strings.Contains(msg, "\n") {
		t.Errorf("CUDA error should be one clear line: %q", msg)
	}
	if _, err := newSessionOptions(SessionOptions{Provider: "tpu"}); err == nil || !strings.Contains(err.Error(), "allowed: cpu, cuda") {
		t.Errorf("unknown provider: %v", err)
	}
	so, err = newSessionOptions(SessionOptions{Provider: ProviderCPU, IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	so.Destroy()
}
