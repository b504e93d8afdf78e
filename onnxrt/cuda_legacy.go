package onnxrt

// ONNX Runtime builds made without CUDA (the npm core that ships beside the separate CUDA
// provider package, docs/gpu.md) refuse onnxruntime_go's CUDA call, CreateCUDAProviderOptions
// ("CUDA execution provider is not enabled in this build"), yet they still load the CUDA
// provider library through the older SessionOptionsAppendExecutionProvider_CUDA entry, which
// onnxruntime_go does not wrap. This file reaches that entry through the C API's function
// table: its order is frozen by ONNX Runtime's ABI promise (new entries only go at the end),
// so the positions below hold for every 1.x release from the one they were counted in on.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The C API's OrtCUDAProviderOptions (the older, fixed-layout options).
typedef struct {
	int device_id;
	int cudnn_conv_algo_search; // 0 = exhaustive, the C++ default
	size_t gpu_mem_limit;
	int arena_extend_strategy;
	int do_copy_in_default_stream;
	int has_user_compute_stream;
	void *user_compute_stream;
	void *default_memory_arena_cfg;
	int tunable_op_enable;
	int tunable_op_tuning_enable;
	int tunable_op_max_tuning_duration_ms;
} marspec_cuda_options;

typedef struct {
	const void *const *(*get_api)(uint32_t version);
	const char *(*get_version_string)(void);
} marspec_api_base;

// Positions in the OrtApi function table.
enum { marspec_get_error_message = 2, marspec_release_status = 93, marspec_append_cuda_v1 = 152 };

// Adds the CUDA provider to session_options; NULL on success, else a message to free().
static char *marspec_append_cuda(const char *lib, void *session_options, int device_id, uint32_t api_version) {
	void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD); // loaded already: this only finds it
	if (h == NULL) {
		return strdup("the onnxruntime library is not loaded");
	}
	const marspec_api_base *(*get_base)(void) = (const marspec_api_base *(*)(void))dlsym(h, "OrtGetApiBase");
	dlclose(h);
	if (get_base == NULL) {
		return strdup("OrtGetApiBase not found in the onnxruntime library");
	}
	const void *const *api = get_base()->get_api(api_version);
	if (api == NULL) {
		return strdup("the onnxruntime library does not offer the C API version asked for");
	}
	marspec_cuda_options o;
	memset(&o, 0, sizeof o);
	o.device_id = device_id;
	o.gpu_mem_limit = SIZE_MAX;
	o.do_copy_in_default_stream = 1;
	void *(*append)(void *, const marspec_cuda_options *) = (void *(*)(void *, const marspec_cuda_options *))api[marspec_append_cuda_v1];
	void *status = append(session_options, &o);
	if (status == NULL) {
		return NULL;
	}
	const char *(*message)(const void *) = (const char *(*)(const void *))api[marspec_get_error_message];
	char *copy = strdup(message(status));
	((void (*)(void *))api[marspec_release_status])(status);
	return copy;
}

// Loads a library by name as the CUDA provider would; NULL on success (it stays loaded, as
// the provider needs it next), else dlerror's message to free().
static char *marspec_probe(const char *name) {
	if (dlopen(name, RTLD_LAZY | RTLD_GLOBAL) != NULL) {
		return NULL;
	}
	const char *e = dlerror();
	return strdup(e != NULL ? e : "unknown dlopen error");
}
*/
import "C"

import (
	"errors"
	"path/filepath"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// apiVersion is the C API version onnxruntime_go v1.27 asks for (its header's ORT_API_VERSION).
const apiVersion = 24

// appendCUDALegacy adds the CUDA provider through the older C API entry. so's only field is
// the C session options pointer (onnxruntime_go keeps it unexported).
func appendCUDALegacy(lib string, so *ort.SessionOptions, id int) error {
	if so == nil {
		return errors.New("no session options")
	}
	// onnxruntime_go v1.27's SessionOptions is exactly one pointer; any other layout (a
	// later version) is refused rather than read wrongly
	if unsafe.Sizeof(*so) != unsafe.Sizeof(uintptr(0)) {
		return errors.New("this onnxruntime_go version's SessionOptions layout is unknown to marspec (onnxrt/cuda_legacy.go)")
	}
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(so))
	cLib := C.CString(lib)
	defer C.free(unsafe.Pointer(cLib))
	msg := C.marspec_append_cuda(cLib, ptr, C.int(id), C.uint32_t(apiVersion))
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	err := C.GoString(msg)
	// ONNX Runtime logs why the provider did not load but returns a generic message; loading
	// the provider again here gives the loader's own reason (a missing or wrong library)
	if reason := loadError(filepath.Join(filepath.Dir(lib), cudaProviderLib)); reason != "" {
		err += " (" + reason + ")"
	}
	return errors.New(err)
}

// loadError is why the loader cannot open the library at path ("" if it can).
func loadError(path string) string {
	cPath := C.CString(path)
	defer C.free(unsafe.Pointer(cPath))
	msg := C.marspec_probe(cPath)
	if msg == nil {
		return ""
	}
	defer C.free(unsafe.Pointer(msg))
	return C.GoString(msg)
}

// cudaLibraries are what libonnxruntime_providers_cuda.so of the GPU build that setup_ort.sh
// fetches needs (its ELF NEEDED list, CUDA 13) plus cuDNN 9, which it opens at run time, and the
// driver's libcuda. Checking them first turns ONNX Runtime's generic "failed to load shared
// library" into the name of the library that is missing.
var cudaLibraries = []string{"libcuda.so.1", "libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10", "libcudnn.so.9"}

// probeCUDALibraries returns the first CUDA library that cannot be loaded, with the loader's
// reason; "" when all load.
func probeCUDALibraries() (string, string) {
	for _, name := range cudaLibraries {
		if reason := loadError(name); reason != "" {
			return name, reason
		}
	}
	return "", ""
}
