package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// --device cuda on a machine without the CUDA provider or a GPU: one line that names what is
// missing and where to read how to get it, and a non-zero exit, before any work is done.
func TestDeviceCUDAWithoutGPU(t *testing.T) {
	out := t.TempDir()
	// a runtime folder with the provider files present but unloadable (empty), as when
	// CUDA's own libraries are missing: ONNX Runtime's reason is passed on
	fake := t.TempDir()
	if err := os.Symlink(ortLib(t), filepath.Join(fake, "libonnxruntime.so")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"libonnxruntime_providers_cuda.so", "libonnxruntime_providers_shared.so"} {
		if err := os.WriteFile(filepath.Join(fake, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"cpu build, generate", nil, []string{"generate", "--device", "cuda", "--out", out},
			[]string{"--device cuda: libonnxruntime_providers_cuda.so and libonnxruntime_providers_shared.so not found in",
				"scripts/ops/setup_ort.sh --gpu", "docs/gpu.md"}},
		{"cpu build, old flag name", nil, []string{"bench", "--provider", "cuda:1"},
			[]string{"libonnxruntime_providers_cuda.so", "not found", "docs/gpu.md"}},
		{"cpu build, fid", nil, []string{"fid", "--device", "cuda", "--stats", out, "-o", filepath.Join(out, "s.npz")},
			[]string{"libonnxruntime_providers_cuda.so", "docs/gpu.md"}},
		{"provider that cannot load", []string{"MARSPEC_ORT_LIB=" + filepath.Join(fake, "libonnxruntime.so")},
			[]string{"generate", "--device", "cuda:0", "--out", out},
			[]string{"--device cuda:0: the CUDA execution provider could not start", "libonnxruntime_providers_shared.so", "docs/gpu.md"}},
		{"unknown device", nil, []string{"generate", "--device", "gpu", "--out", out},
			[]string{`device "gpu" unknown (allowed: cpu, cuda, cuda:N`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := marspec(t, c.env, c.args...)
			if code == 0 {
				t.Fatalf("exit 0, want an error\n%s", stdout)
			}
			msg := strings.TrimSpace(stderr)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Contains(strings.TrimPrefix(msg, "marspec: "), "\n") && !strings.Contains(msg, "Usage") {
				t.Errorf("error spans lines: %q", msg)
			}
		})
	}
	if files, _ := filepath.Glob(filepath.Join(out, "*.png")); len(files) != 0 {
		t.Errorf("a failed cuda run wrote %v", files)
	}
}

// With the GPU build that `setup_ort.sh --gpu` fetches (ORT 1.29 core + CUDA provider): on a
// machine without CUDA the error names the first CUDA library that cannot be loaded; on a GPU
// machine with CUDA on the library path the command runs.
func TestDeviceCUDAWithGPUBuild(t *testing.T) {
	lib, err := filepath.Abs("../../third_party/onnxruntime-gpu/libonnxruntime.so")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lib); err != nil {
		t.Skip("no GPU build in third_party/onnxruntime-gpu (bash scripts/ops/setup_ort.sh --gpu)")
	}
	out := t.TempDir()
	stdout, stderr, code := marspec(t, []string{"MARSPEC_ORT_LIB=" + lib}, "generate", "--model", "target", "--class", "0",
		"--n", "1", "--device", "cuda", "--out", out)
	if code == 0 {
		t.Logf("ran on the GPU: %s", stdout)
		return
	}
	msg := strings.TrimSpace(stderr)
	if !strings.Contains(msg, "cannot be loaded") || !strings.Contains(msg, "docs/gpu.md") || strings.Contains(msg, "\n") {
		t.Errorf("want one line naming the CUDA library that is missing and docs/gpu.md, got %q", msg)
	}
}

// With the GPU build and stand-in CUDA libraries (empty shared objects under the right names):
// the CUDA libraries load, so ONNX Runtime tries the provider (through onnxruntime_go's options
// with the CUDA-built core, through the older C API entry, onnxrt/cuda_legacy.go, with a core
// built without CUDA), and the error carries the loader's reason.
func TestDeviceCUDALegacyEntry(t *testing.T) {
	lib, err := filepath.Abs("../../third_party/onnxruntime-gpu/libonnxruntime.so")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lib); err != nil {
		t.Skip("no GPU build in third_party/onnxruntime-gpu (bash scripts/ops/setup_ort.sh --gpu)")
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to make stand-in CUDA libraries")
	}
	fake := t.TempDir()
	src := filepath.Join(fake, "empty.c")
	if err := os.WriteFile(src, []byte("int marspec_stand_in;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"libcuda.so.1", "libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10", "libcudnn.so.9"} {
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(fake, name), src).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	_, stderr, code := marspec(t, []string{"MARSPEC_ORT_LIB=" + lib, "LD_LIBRARY_PATH=" + fake}, "generate", "--model", "target",
		"--class", "0", "--n", "1", "--device", "cuda:0", "--out", t.TempDir())
	if code == 0 {
		t.Fatal("exit 0 with stand-in CUDA libraries")
	}
	var last string // ONNX Runtime logs its own lines first; marspec's error is the last
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(line, "marspec: ") {
			last = line
		}
	}
	for _, want := range []string{"--device cuda:0: the CUDA execution provider could not start", "libonnxruntime_providers_cuda.so: undefined symbol", "docs/gpu.md"} {
		if !strings.Contains(last, want) {
			t.Errorf("error %q lacks %q (stderr:\n%s)", last, want, stderr)
		}
	}
}
