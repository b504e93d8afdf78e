package onnxrt

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDevice(t *testing.T) {
	good := map[string]Device{"cpu": CPU, "": CPU, "cuda": {CUDA: true}, "cuda:0": {CUDA: true}, "cuda:3": {CUDA: true, ID: 3}}
	for s, want := range good {
		got, err := ParseDevice(s)
		if err != nil || got != want {
			t.Errorf("ParseDevice(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"gpu", "cuda:", "cuda:-1", "cuda:x", "CUDA", "cpu:0", "tpu"} {
		_, err := ParseDevice(s)
		if err == nil || !strings.Contains(err.Error(), "allowed: cpu, cuda, cuda:N") || !strings.Contains(err.Error(), `"`+s+`"`) {
			t.Errorf("ParseDevice(%q): %v, want an error naming it and what is allowed", s, err)
		}
	}
	if s := (Device{CUDA: true, ID: 2}).String(); s != "cuda:2" {
		t.Errorf("String = %q", s)
	}
	if CPU.String() != "cpu" || CPU.Provider() != "cpu" || (Device{CUDA: true, ID: 1}).Provider() != "cuda" {
		t.Error("String/Provider of cpu or cuda:1 wrong")
	}
}

func TestCheckCUDAProvider(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libonnxruntime.so")
	touch(t, lib)
	err := CheckCUDAProvider(lib)
	if err == nil {
		t.Fatal("no error with neither provider file present")
	}
	msg := err.Error()
	for _, want := range []string{cudaProviderLib + " and " + sharedProviderLib + " not found in " + dir,
		"scripts/ops/setup_ort.sh --gpu", "--ort-lib", "--device cpu", "docs/gpu.md"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	touch(t, filepath.Join(dir, sharedProviderLib))
	if err := CheckCUDAProvider(lib); err == nil || strings.Contains(err.Error(), sharedProviderLib) || !strings.Contains(err.Error(), cudaProviderLib) {
		t.Errorf("only the CUDA provider missing: %v", err)
	}
	touch(t, filepath.Join(dir, cudaProviderLib))
	if err := CheckCUDAProvider(lib); err != nil {
		t.Errorf("both present: %v", err)
	}
	if err := CheckCUDAProvider(""); err == nil {
		t.Error("no error before the runtime is loaded")
	}
}

// ONNX Runtime's message about a provider that did not load names a CUDA library only when the
// loader could not open one; the provider's own files and other failures are not CUDA's.
func TestMissingLibrary(t *testing.T) {
	cases := []struct{ msg, want string }{
		{"Failed to load library /x/libonnxruntime_providers_cuda.so with error: libcublasLt.so.13: cannot open shared object file: No such file or directory", "libcublasLt.so.13"},
		{"with error: libcudnn.so.9: cannot open shared object file: No such file or directory; more", "libcudnn.so.9"},
		{"Failed to load library libonnxruntime_providers_cuda.so: cannot open shared object file: No such file or directory", ""},
		{"Failed to load library /x/libonnxruntime_providers_shared.so with error: /x/libonnxruntime_providers_shared.so: file too short", ""},
		{"CUDA failure 100: no CUDA-capable device is detected", ""},
	}
	for _, c := range cases {
		lib, reason := missingLibrary(errors.New(c.msg))
		if lib != c.want || (lib != "" && !strings.HasPrefix(reason, lib+": cannot open")) {
			t.Errorf("%q: got %q (%q), want %q", c.msg, lib, reason, c.want)
		}
	}
}
