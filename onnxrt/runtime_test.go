package onnxrt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// needRuntime loads the repository's copy of ONNX Runtime, skipping the test when
// scripts/ops/setup_ort.sh (make setup) has not fetched it yet.
func needRuntime(t *testing.T) {
	t.Helper()
	lib := filepath.Join("..", DefaultLib)
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("%s is absent: run `make setup` (bash scripts/ops/setup_ort.sh) to run this test", lib)
	}
	if err := Init(lib, CPU); err != nil {
		t.Fatal(err)
	}
}

func TestMissingRuntimeLibrary(t *testing.T) {
	if _, err := findLib("/no/such/lib.so", CPU); err == nil || !strings.Contains(err.Error(), "/no/such/lib.so not found (given by --ort-lib)") {
		t.Fatalf("explicit path: %v", err)
	}
	t.Setenv("MARSPEC_ORT_LIB", "/no/env/lib.so")
	if _, err := findLib("", CPU); err == nil || !strings.Contains(err.Error(), "/no/env/lib.so not found (given by MARSPEC_ORT_LIB)") {
		t.Fatalf("environment: %v", err)
	}
	t.Setenv("MARSPEC_ORT_LIB", "")
	t.Chdir(t.TempDir()) // no third_party here, nor beside the test binary
	_, err := findLib("", CPU)
	if err == nil {
		t.Fatal("found a library in an empty folder")
	}
	msg := err.Error()
	for _, want := range []string{"onnxruntime library not found (tried: " + DefaultLib, `run "make setup"`, "--ort-lib", "MARSPEC_ORT_LIB"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRuntimeLookupOrder(t *testing.T) {
	dir := t.TempDir()
	touch(t, filepath.Join(dir, DefaultLib))
	env := filepath.Join(dir, "env.so")
	touch(t, env)
	t.Chdir(dir)
	t.Setenv("MARSPEC_ORT_LIB", "")
	if got, err := findLib("", CPU); err != nil || got != DefaultLib {
		t.Errorf("working directory: %q, %v", got, err)
	}
	// a CUDA device falls back to the CPU build (the provider check then says what is missing)
	if got, err := findLib("", Device{CUDA: true}); err != nil || got != DefaultLib {
		t.Errorf("cuda without the GPU build: %q, %v", got, err)
	}
	touch(t, filepath.Join(dir, DefaultGPULib))
	if got, err := findLib("", Device{CUDA: true}); err != nil || got != DefaultGPULib {
		t.Errorf("cuda with the GPU build: %q, %v", got, err)
	}
	if got, err := findLib("", CPU); err != nil || got != DefaultLib {
		t.Errorf("cpu with both builds: %q, %v", got, err)
	}
	t.Setenv("MARSPEC_ORT_LIB", env)
	if got, err := findLib("", CPU); err != nil || got != env {
		t.Errorf("environment before working directory: %q, %v", got, err)
	}
	lib := filepath.Join(dir, DefaultLib)
	if got, err := findLib(lib, Device{CUDA: true}); err != nil || got != lib {
		t.Errorf("explicit path before environment: %q, %v", got, err)
	}
}

func TestInitRuntimeTwice(t *testing.T) {
	needRuntime(t)
	// once initialised, later calls (with any path) are no-ops
	if err := Init("", CPU); err != nil {
		t.Fatal(err)
	}
	if err := Init("/no/such/lib.so", Device{CUDA: true}); err != nil {
		t.Fatal(err)
	}
	if LoadedLib() == "" {
		t.Error("LoadedLib is empty after Init")
	}
}

func TestSessionOptions(t *testing.T) {
	needRuntime(t)
	so, err := newSessionOptions(SessionOptions{Device: CPU, IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	so.Destroy()
	// The repository's CPU build has no CUDA provider beside it: the error says which file is
	// missing, where it looked and how to get it. (Where a GPU build is installed there,
	// the provider may start or fail on missing CUDA libraries; both are one line.)
	so, err = newSessionOptions(SessionOptions{Device: Device{CUDA: true}})
	if err == nil {
		so.Destroy()
		t.Log("CUDA execution provider available")
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "--device cuda") || !strings.Contains(msg, "docs/gpu.md") {
		t.Errorf("CUDA error should be one clear line starting --device cuda and naming docs/gpu.md: %q", msg)
	}
}
