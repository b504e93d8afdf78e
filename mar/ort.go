package mar

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// DefaultORTLib is where `make setup` puts ONNX Runtime's shared library.
const DefaultORTLib = "third_party/onnxruntime/libonnxruntime.so"

// Provider selects the ONNX Runtime execution provider.
type Provider string

const (
	ProviderCPU  Provider = "cpu"
	ProviderCUDA Provider = "cuda"
)

// SessionOptions configure every ONNX session of a model.
type SessionOptions struct {
	Provider       Provider
	IntraOpThreads int // 0 = ONNX Runtime's default
}

var runtimeMu sync.Mutex

// InitRuntime loads ONNX Runtime once per process. libPath may be empty: then the environment
// variable MARSPEC_ORT_LIB, then the default path (relative to the working directory, the
// executable's folder and its parent) are tried.
func InitRuntime(libPath string) error {
	runtimeMu.Lock()
	defer runtimeMu.Unlock()
	if ort.IsInitialized() {
		return nil
	}
	path, err := findORTLib(libPath)
	if err != nil {
		return err
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("onnxruntime library %s could not be loaded: %v", path, oneLine(err))
	}
	return nil
}

func findORTLib(explicit string) (string, error) {
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
	tried := []string{DefaultORTLib}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		tried = append(tried, filepath.Join(dir, DefaultORTLib), filepath.Join(dir, "..", DefaultORTLib))
	}
	for _, p := range tried {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("onnxruntime library not found (tried: %s); run \"make setup\", or pass --ort-lib or set MARSPEC_ORT_LIB",
		strings.Join(tried, ", "))
}

func newSessionOptions(opt SessionOptions) (*ort.SessionOptions, error) {
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
	switch opt.Provider {
	case "", ProviderCPU:
	case ProviderCUDA:
		cuda, err := ort.NewCUDAProviderOptions()
		if err == nil {
			err = so.AppendExecutionProviderCUDA(cuda)
			cuda.Destroy()
		}
		if err != nil {
			so.Destroy()
			// the npm build ships only the CPU library; CUDA needs ORT's GPU build plus CUDA and cuDNN
			return nil, fmt.Errorf("cuda execution provider unavailable: %v (it needs ONNX Runtime's GPU libraries beside libonnxruntime.so and CUDA/cuDNN; use --provider cpu)", oneLine(err))
		}
	default:
		so.Destroy()
		return nil, fmt.Errorf("execution provider %q unknown (allowed: cpu, cuda)", opt.Provider)
	}
	return so, nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
