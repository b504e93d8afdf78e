package mar

import (
	"os"
	"path/filepath"
	"testing"

	"marspec/onnxrt"
)

// needRuntime loads the repository's copy of ONNX Runtime, skipping the test when
// scripts/ops/setup_ort.sh (make setup) has not fetched it yet.
func needRuntime(t testing.TB) {
	t.Helper()
	lib := filepath.Join("..", onnxrt.DefaultLib)
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("%s is absent: run `make setup` (bash scripts/ops/setup_ort.sh) to run this test", lib)
	}
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
}
