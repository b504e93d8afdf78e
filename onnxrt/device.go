package onnxrt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// Device is where a session runs: the CPU, or CUDA GPU number ID.
type Device struct {
	CUDA bool
	ID   int
}

// CPU is the default device.
var CPU = Device{}

// DeviceHelp is the flag help shared by every command and serve.
const DeviceHelp = "where models run: cpu, cuda (GPU 0) or cuda:N (docs/gpu.md)"

// ParseDevice reads cpu, cuda or cuda:N (N >= 0).
func ParseDevice(s string) (Device, error) {
	switch s {
	case "cpu", "":
		return CPU, nil
	case "cuda":
		return Device{CUDA: true}, nil
	}
	if rest, ok := strings.CutPrefix(s, "cuda:"); ok {
		id, err := strconv.Atoi(rest)
		if err == nil && id >= 0 && id < 1024 {
			return Device{CUDA: true, ID: id}, nil
		}
	}
	return CPU, fmt.Errorf("device %q unknown (allowed: cpu, cuda, cuda:N with N a GPU number from 0)", s)
}

// String is the flag spelling: "cpu" or "cuda:N".
func (d Device) String() string {
	if !d.CUDA {
		return "cpu"
	}
	return "cuda:" + strconv.Itoa(d.ID)
}

// Provider is the execution provider's short name: "cpu" or "cuda" (what schedules key on).
func (d Device) Provider() string {
	if d.CUDA {
		return "cuda"
	}
	return "cpu"
}

// CUDA provider files: ONNX Runtime loads them from the folder of libonnxruntime.so.
const (
	cudaProviderLib   = "libonnxruntime_providers_cuda.so"
	sharedProviderLib = "libonnxruntime_providers_shared.so"
)

// CheckCUDAProvider reports, as one line, which CUDA provider file is missing beside lib (the
// loaded libonnxruntime.so), where it looked and how to get it.
func CheckCUDAProvider(lib string) error {
	if lib == "" {
		return fmt.Errorf("--device cuda: ONNX Runtime is not loaded yet")
	}
	dir := filepath.Dir(lib)
	var missing []string
	for _, name := range []string{cudaProviderLib, sharedProviderLib} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("--device cuda: %s not found in %s (beside the loaded %s); the CPU build of ONNX Runtime has no CUDA provider: "+
		"run `bash scripts/ops/setup_ort.sh --gpu` to put ONNX Runtime's GPU build in %s, or pass --ort-lib a libonnxruntime.so with the provider beside it; "+
		"or use --device cpu (docs/gpu.md)", strings.Join(missing, " and "), dir, filepath.Base(lib), filepath.Dir(DefaultGPULib))
}

// appendCUDA adds the CUDA provider for GPU id, capturing CUDA graphs if cudaGraph. ONNX
// Runtime loads the provider library here; where that fails because a CUDA library is missing,
// the error names that library in one line (ONNX Runtime's own message is a paragraph about
// the provider's path).
func appendCUDA(so *ort.SessionOptions, id int, cudaGraph bool) error {
	cuda, err := ort.NewCUDAProviderOptions()
	if err == nil {
		settings := map[string]string{"device_id": strconv.Itoa(id)}
		if cudaGraph {
			settings["enable_cuda_graph"] = "1"
		}
		err = cuda.Update(settings)
		if err == nil {
			err = so.AppendExecutionProviderCUDA(cuda)
		}
		cuda.Destroy()
		if err != nil {
			if lib, reason := missingLibrary(err); lib != "" {
				return missingCUDALibrary(id, lib, reason)
			}
		}
	} else if strings.Contains(err.Error(), "not enabled in this build") {
		if cudaGraph { // the legacy OrtCUDAProviderOptions struct has no field for it
			return fmt.Errorf("--device cuda:%d: CUDA graph capture needs ONNX Runtime's GPU build (scripts/ops/setup_ort.sh --gpu); "+
				"this core is built without CUDA and loads the provider through the older options, which cannot ask for it (docs/gpu.md)", id)
		}
		// a core built without CUDA that still loads the provider library (cuda_legacy.go); the
		// CUDA libraries are probed first, so that a missing one is named before the provider loads
		if lib, reason := probeCUDALibraries(); lib != "" {
			return missingCUDALibrary(id, lib, reason)
		}
		err = appendCUDALegacy(LoadedLib(), so, id)
	}
	if err != nil {
		return fmt.Errorf("--device cuda:%d: the CUDA execution provider could not start: %v; it needs CUDA 13 "+
			"(libcudart.so.13, libcublas.so.13, libcublasLt.so.13, libcurand.so.10), cuDNN 9 and an NVIDIA driver on the "+
			"library path (LD_LIBRARY_PATH) and a visible GPU; or use --device cpu (docs/gpu.md)", id, oneLine(err))
	}
	return nil
}

// missingLibrary finds, in ONNX Runtime's message about a provider it could not load, the CUDA
// library the loader could not open ("libcublasLt.so.13: cannot open shared object file: ...");
// "" where the failure is something else (a damaged provider file, no GPU).
func missingLibrary(err error) (lib, reason string) {
	m := cannotOpen.FindStringSubmatch(err.Error())
	if m == nil || strings.HasPrefix(m[1], "libonnxruntime") {
		return "", ""
	}
	return m[1], m[0]
}

var cannotOpen = regexp.MustCompile(`(lib[\w+.-]*\.so[.\d]*): cannot open shared object file: [^;\n]*`)

// missingCUDALibrary is the one-line error for a CUDA library the provider needs and cannot load.
func missingCUDALibrary(id int, lib, reason string) error {
	return fmt.Errorf("--device cuda:%d: CUDA library %s cannot be loaded (%s); the CUDA provider needs CUDA 13 "+
		"(libcudart.so.13, libcublas.so.13, libcublasLt.so.13, libcurand.so.10), cuDNN 9 (libcudnn.so.9) and the NVIDIA driver "+
		"(libcuda.so.1) on the library path (LD_LIBRARY_PATH): docs/gpu.md says where they come from; or use --device cpu",
		id, lib, oneLine(errors.New(reason)))
}
