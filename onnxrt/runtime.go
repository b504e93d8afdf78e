// Package onnxrt is marspec's ONNX Runtime layer: finding and loading the shared library, the
// device a session runs on (CPU or a CUDA GPU), and Graph, one session with its tensors cached
// per batch size. The model packages (mar, fid) describe their graphs' inputs and outputs and
// leave everything runtime-specific here.
package onnxrt

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	ort "github.com/yalue/onnxruntime_go"
)

// DefaultLib is where `make setup` (scripts/ops/setup_ort.sh) puts ONNX Runtime's CPU build.
const DefaultLib = "third_party/onnxruntime/libonnxruntime.so"

// DefaultGPULib is where `scripts/ops/setup_ort.sh --gpu` puts ONNX Runtime's build that has the
// CUDA provider beside it (docs/gpu.md). A CUDA device looks here before DefaultLib.
const DefaultGPULib = "third_party/onnxruntime-gpu/libonnxruntime.so"

// SessionOptions configure every ONNX session of a model.
type SessionOptions struct {
	Device         Device
	IntraOpThreads int // 0 = ONNX Runtime's default
	Tuning         Tuning
	// CUDAGraph asks the CUDA provider to capture each run as a CUDA graph and replay it
	// (fixedrun.go). Such a session runs only through Graph.Fixed, so set it per graph, not on
	// options every graph of a model shares. The CPU accepts it and ignores it.
	CUDAGraph bool
	// FixedDims gives named free dimensions of the graph one size, as if the model said so.
	// ONNX Runtime then knows every shape when it plans the session: a graph with thousands of
	// nodes whose row count is otherwise unknown (the unrolled fused head, 2N rows under
	// guidance) takes time quadratic in its node count to open (12 s against 1.1 s for 3,700
	// nodes on a 2-core CPU), and a CUDA graph needs fixed shapes anyway.
	FixedDims []FixedDim
}

// FixedDim is one named free dimension and its size.
type FixedDim struct {
	Name string
	Size int64
}

var (
	initMu    sync.Mutex
	loadedLib string // the library Init loaded, for the CUDA provider check
)

// Init loads ONNX Runtime once per process. libPath may be empty: then the environment
// variable MARSPEC_ORT_LIB, then the default paths for dev (relative to the working directory,
// the executable's folder and its parent) are tried. Later calls are no-ops: a process holds
// one ONNX Runtime.
func Init(libPath string, dev Device) error {
	initMu.Lock()
	defer initMu.Unlock()
	if ort.IsInitialized() {
		return nil
	}
	path, err := findLib(libPath, dev)
	if err != nil {
		return err
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("onnxruntime library %s could not be loaded: %v", path, oneLine(err))
	}
	loadedLib = path
	return nil
}

// LoadedLib is the path of the library Init loaded ("" before).
func LoadedLib() string {
	initMu.Lock()
	defer initMu.Unlock()
	return loadedLib
}

// defaultLibs lists where the library is looked for when no path is given: the GPU build
// first for a CUDA device, then the CPU build; each relative to the working directory, the
// executable's folder and its parent.
func defaultLibs(dev Device) []string {
	rel := []string{DefaultLib}
	if dev.CUDA {
		rel = []string{DefaultGPULib, DefaultLib}
	}
	tried := append([]string{}, rel...)
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		for _, r := range rel {
			tried = append(tried, filepath.Join(dir, r), filepath.Join(dir, "..", r))
		}
	}
	return tried
}

func findLib(explicit string, dev Device) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("onnxruntime library %s not found (given by --ort-lib)", explicit)
		}
		return explicit, nil
	}
	if env := os.Getenv("MARSPEC_ORT_LIB"); env != "" {
		if _, err := os.Stat(env); err != nil {
			return "", fmt.Errorf("onnxruntime library %s not found (given by MARSPEC_ORT_LIB)", env)
		}
		return env, nil
	}
	tried := defaultLibs(dev)
	for _, p := range tried {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("onnxruntime library not found (tried: %s); run \"make setup\", or pass --ort-lib or set MARSPEC_ORT_LIB",
		strings.Join(tried, ", "))
}

func newSessionOptions(opt SessionOptions) (*ort.SessionOptions, error) {
	if opt.Device.CUDA {
		// before ONNX Runtime tries, so a missing file gets a message that says how to get it
		if err := CheckCUDAProvider(LoadedLib()); err != nil {
			return nil, err
		}
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	if opt.IntraOpThreads > 0 {
		if err := so.SetIntraOpNumThreads(opt.IntraOpThreads); err != nil {
			so.Destroy()
			return nil, err
		}
	}
	if err := opt.Tuning.apply(so); err != nil {
		so.Destroy()
		return nil, err
	}
	if err := fixDims(so, opt.FixedDims); err != nil {
		so.Destroy()
		return nil, err
	}
	if opt.Device.CUDA {
		if err := appendCUDA(so, opt.Device.ID, opt.CUDAGraph); err != nil {
			so.Destroy()
			return nil, err
		}
	}
	if err := saveOptimized(so); err != nil {
		so.Destroy()
		return nil, err
	}
	return so, nil
}

// OptimizedDirEnv names a folder where every session opened writes the graph ONNX Runtime
// runs after its own optimisations (session-NNN.onnx, weights in session-NNN.onnx.data): on a
// GPU, which nodes its fusions leave, so which kernels a run launches (scripts/gpu/gpu_mar.py's
// kernels stage counts them). For diagnosis: every session writes its weights once more.
const OptimizedDirEnv = "MARSPEC_ORT_OPTIMIZED_DIR"

var optimizedSessions atomic.Int64

func saveOptimized(so *ort.SessionOptions) error {
	dir := os.Getenv(OptimizedDirEnv)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %v", OptimizedDirEnv, err)
	}
	name := fmt.Sprintf("session-%03d.onnx", optimizedSessions.Add(1))
	if err := so.SetOptimizedModelFilePath(filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("%s: %v", OptimizedDirEnv, err)
	}
	return so.AddSessionConfigEntry("session.optimized_model_external_initializers_file_name", name+".data")
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Prepare loads ONNX Runtime for dev and, for a CUDA device, starts the CUDA provider once, so
// that a missing provider file, CUDA library or GPU is reported when a command or the server
// starts rather than at its first image. The error is one line naming what is missing.
func Prepare(libPath string, dev Device) error {
	if err := Init(libPath, dev); err != nil {
		return err
	}
	if !dev.CUDA {
		return nil
	}
	so, err := newSessionOptions(SessionOptions{Device: dev})
	if err != nil {
		return err
	}
	return so.Destroy()
}

// fixDims applies FixedDims through the C API, which onnxruntime_go does not wrap for this.
func fixDims(so *ort.SessionOptions, dims []FixedDim) error {
	if len(dims) == 0 {
		return nil
	}
	if err := capi(); err != nil {
		return fmt.Errorf("fixed dimensions: %v", err)
	}
	f := reflect.ValueOf(so).Elem().FieldByName("o")
	if f.Kind() != reflect.Pointer || f.IsNil() {
		return fmt.Errorf("this onnxruntime_go version's SessionOptions layout is unknown to marspec (onnxrt/runtime.go)")
	}
	for _, d := range dims {
		if d.Size < 1 {
			return fmt.Errorf("fixed dimension %s: size %d, want at least 1", d.Name, d.Size)
		}
		if err := fixDim(f.UnsafePointer(), d.Name, d.Size); err != nil {
			return fmt.Errorf("fixed dimension %s=%d: %v", d.Name, d.Size, err)
		}
	}
	return nil
}
