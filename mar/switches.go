package mar

import (
	"os"

	"marspec/onnxrt"
)

// onCUDAUnless is a path's choice for dev: on CUDA, off on the CPU, unless the environment
// variable name says "on" or "off" (so that CPU tests run a GPU path, and a GPU can step back
// from one).
func onCUDAUnless(name string, dev onnxrt.Device) bool {
	switch os.Getenv(name) {
	case "on":
		return true
	case "off":
		return false
	}
	return dev.CUDA
}
