package onnxrt

// The C API calls behind IO binding (iobinding.go) and fixed-address runs (fixedrun.go), which
// onnxruntime_go v1.27 does not wrap.
// As in cuda_legacy.go they go through the OrtApi function table by position: ONNX Runtime
// only appends to that table, so positions counted in one release hold for every later 1.x.
// The positions were counted with offsetof(OrtApi, entry)/sizeof(void *) against the
// onnxruntime_c_api.h that onnxruntime_go v1.27.0 ships (ORT_API_VERSION 24).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*marspec_fn)();

enum {
	pos_get_error_message = 2,
	pos_create_run_options = 39,
	pos_create_tensor_as_ort_value = 48,
	pos_get_tensor_mutable_data = 51,
	pos_get_tensor_element_type = 60,
	pos_get_tensor_shape_element_count = 64,
	pos_get_tensor_type_and_shape = 65,
	pos_create_memory_info = 68,
	pos_allocator_free = 76,
	pos_get_allocator_with_default_options = 78,
	pos_release_status = 93,
	pos_release_memory_info = 94,
	pos_release_value = 96,
	pos_release_run_options = 97,
	pos_release_tensor_type_and_shape_info = 99,
	pos_create_allocator = 131,
	pos_add_free_dimension_override_by_name = 124,
	pos_release_allocator = 132,
	pos_run_with_binding = 133,
	pos_create_io_binding = 134,
	pos_release_io_binding = 135,
	pos_bind_input = 136,
	pos_bind_output = 137,
	pos_bind_output_to_device = 138,
	pos_get_bound_output_values = 140,
	pos_clear_bound_outputs = 142,
	pos_add_run_config_entry = 165,
	pos_synchronize_bound_inputs = 202,
	pos_synchronize_bound_outputs = 203,
};

typedef struct {
	const void *const *(*get_api)(uint32_t version);
	const char *(*get_version_string)(void);
} mb_api_base;

static const void *const *mb_api;

// mb_init finds the C API table of the loaded library; NULL on success, else a static message.
static const char *mb_init(const char *lib, uint32_t version) {
	if (mb_api != NULL) {
		return NULL;
	}
	void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD); // loaded already: this only finds it
	if (h == NULL) {
		return "the onnxruntime library is not loaded";
	}
	const mb_api_base *(*get_base)(void) = (const mb_api_base *(*)(void))dlsym(h, "OrtGetApiBase");
	dlclose(h);
	if (get_base == NULL) {
		return "OrtGetApiBase not found in the onnxruntime library";
	}
	const void *const *api = get_base()->get_api(version);
	if (api == NULL) {
		return "the onnxruntime library does not offer the C API version asked for";
	}
	mb_api = api;
	return NULL;
}

// mb_status turns an OrtStatus into a message to free() (NULL: success) and releases it.
static char *mb_status(void *status) {
	if (status == NULL) {
		return NULL;
	}
	char *copy = strdup(((const char *(*)(const void *))mb_api[pos_get_error_message])(status));
	((void (*)(void *))mb_api[pos_release_status])(status);
	return copy;
}

static char *mb_create_binding(void *session, void **out) {
	return mb_status(((void *(*)(void *, void **))mb_api[pos_create_io_binding])(session, out));
}

static void mb_release_binding(void *binding) {
	((void (*)(void *))mb_api[pos_release_io_binding])(binding);
}

// mb_memory_info makes the memory info of a device: name "Cpu" or "Cuda", device allocator,
// default memory type.
static char *mb_memory_info(const char *name, int id, void **out) {
	return mb_status(((void *(*)(const char *, int, int, int, void **))mb_api[pos_create_memory_info])(name, 0, id, 0, out));
}

static void mb_release_memory_info(void *info) {
	((void (*)(void *))mb_api[pos_release_memory_info])(info);
}

static char *mb_bind_input(void *binding, const char *name, void *value) {
	return mb_status(((void *(*)(void *, const char *, void *))mb_api[pos_bind_input])(binding, name, value));
}

static char *mb_bind_output_to_device(void *binding, const char *name, void *info) {
	return mb_status(((void *(*)(void *, const char *, void *))mb_api[pos_bind_output_to_device])(binding, name, info));
}

static void mb_clear_outputs(void *binding) {
	((void (*)(void *))mb_api[pos_clear_bound_outputs])(binding);
}

// mb_fix_dim fixes a named free dimension of every graph the options open.
static char *mb_fix_dim(void *options, const char *name, int64_t size) {
	return mb_status(((void *(*)(void *, const char *, int64_t))mb_api[pos_add_free_dimension_override_by_name])(options, name, size));
}

// mb_bind_output binds an existing tensor as an output: the run writes into its memory.
static char *mb_bind_output(void *binding, const char *name, void *value) {
	return mb_status(((void *(*)(void *, const char *, void *))mb_api[pos_bind_output])(binding, name, value));
}

// mb_run waits for the copies binding started (a CUDA provider may copy on another stream),
// runs, and waits for the outputs, so that another session may read them. options may be NULL.
static char *mb_run(void *session, void *binding, void *options) {
	char *err = mb_status(((void *(*)(void *))mb_api[pos_synchronize_bound_inputs])(binding));
	if (err == NULL) {
		err = mb_status(((void *(*)(void *, void *, void *))mb_api[pos_run_with_binding])(session, options, binding));
	}
	if (err == NULL) {
		err = mb_status(((void *(*)(void *))mb_api[pos_synchronize_bound_outputs])(binding));
	}
	return err;
}

// mb_outputs copies the bound output values (each the caller's to release) into out, which
// holds room for max; *count gets how many there were.
static char *mb_outputs(void *binding, void **out, size_t max, size_t *count) {
	void *alloc = NULL;
	char *err = mb_status(((void *(*)(void **))mb_api[pos_get_allocator_with_default_options])(&alloc));
	if (err != NULL) {
		return err;
	}
	void **values = NULL;
	*count = 0;
	err = mb_status(((void *(*)(void *, void *, void ***, size_t *))mb_api[pos_get_bound_output_values])(binding, alloc, &values, count));
	if (err != NULL) {
		return err;
	}
	for (size_t i = 0; i < *count; i++) {
		if (i < max) {
			out[i] = values[i];
		} else {
			((void (*)(void *))mb_api[pos_release_value])(values[i]);
		}
	}
	if (values != NULL) {
		((void *(*)(void *, void *))mb_api[pos_allocator_free])(alloc, values);
	}
	return NULL;
}

// mb_run_options makes run options carrying one config entry.
static char *mb_run_options(const char *key, const char *value, void **out) {
	char *err = mb_status(((void *(*)(void **))mb_api[pos_create_run_options])(out));
	if (err == NULL) {
		err = mb_status(((void *(*)(void *, const char *, const char *))mb_api[pos_add_run_config_entry])(*out, key, value));
		if (err != NULL) {
			((void (*)(void *))mb_api[pos_release_run_options])(*out);
		}
	}
	return err;
}

static void mb_release_run_options(void *options) {
	((void (*)(void *))mb_api[pos_release_run_options])(options);
}

// mb_allocator is the session's allocator for the memory info's device (CreateAllocator).
static char *mb_allocator(void *session, void *info, void **out) {
	return mb_status(((void *(*)(void *, void *, void **))mb_api[pos_create_allocator])(session, info, out));
}

static void mb_release_allocator(void *allocator) {
	((void (*)(void *))mb_api[pos_release_allocator])(allocator);
}

// mb_tensor allocates a tensor of this shape and element type from allocator.
static char *mb_tensor(void *allocator, const int64_t *shape, size_t rank, int type, void **out) {
	return mb_status(((void *(*)(void *, const int64_t *, size_t, int, void **))mb_api[pos_create_tensor_as_ort_value])(allocator, shape, rank, type, out));
}

static void mb_release_value(void *value) {
	((void (*)(void *))mb_api[pos_release_value])(value);
}

// mb_tensor_data gives a tensor's data pointer, element type and element count.
static char *mb_tensor_data(void *value, void **data, int *type, size_t *count) {
	char *err = mb_status(((void *(*)(void *, void **))mb_api[pos_get_tensor_mutable_data])(value, data));
	if (err != NULL) {
		return err;
	}
	void *info = NULL;
	err = mb_status(((void *(*)(void *, void **))mb_api[pos_get_tensor_type_and_shape])(value, &info));
	if (err != NULL) {
		return err;
	}
	err = mb_status(((void *(*)(void *, int *))mb_api[pos_get_tensor_element_type])(info, type));
	if (err == NULL) {
		err = mb_status(((void *(*)(void *, size_t *))mb_api[pos_get_tensor_shape_element_count])(info, count));
	}
	((void (*)(void *))mb_api[pos_release_tensor_type_and_shape_info])(info);
	return err;
}
*/
import "C"

import (
	"errors"
	"sync"
	"unsafe"
)

var (
	capiOnce sync.Once
	capiErr  error
)

// capi makes sure the C API table is found (after Init loaded the library).
func capi() error {
	capiOnce.Do(func() {
		lib := C.CString(LoadedLib())
		defer C.free(unsafe.Pointer(lib))
		if msg := C.mb_init(lib, C.uint32_t(apiVersion)); msg != nil {
			capiErr = errors.New(C.GoString(msg))
		}
	})
	return capiErr
}

// status turns a message from the C side into an error (nil: success).
func status(msg *C.char) error {
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return errors.New(C.GoString(msg))
}

// C element types (ONNXTensorElementDataType): Read copies out float and double.
const (
	elemFloat  = 1
	elemInt64  = 7
	elemDouble = 11
)

// The wrappers below take and return the C objects as unsafe.Pointer (OrtSession, OrtIoBinding,
// OrtMemoryInfo, OrtValue).

// fixDim sets a free dimension override on session options (OrtSessionOptions).
func fixDim(options unsafe.Pointer, name string, size int64) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return status(C.mb_fix_dim(options, cname, C.int64_t(size)))
}

func createBinding(session unsafe.Pointer) (unsafe.Pointer, error) {
	var out unsafe.Pointer
	err := status(C.mb_create_binding(session, &out))
	return out, err
}

func releaseBinding(binding unsafe.Pointer) { C.mb_release_binding(binding) }

// newMemoryInfo describes a device's memory: name "Cpu" or "Cuda", GPU number id.
func newMemoryInfo(name string, id int) (unsafe.Pointer, error) {
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	var out unsafe.Pointer
	err := status(C.mb_memory_info(cName, C.int(id), &out))
	return out, err
}

func releaseMemoryInfo(info unsafe.Pointer) { C.mb_release_memory_info(info) }

func bindInput(binding unsafe.Pointer, name string, value unsafe.Pointer) error {
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	return status(C.mb_bind_input(binding, cName, value))
}

func bindOutputToDevice(binding unsafe.Pointer, name string, info unsafe.Pointer) error {
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	return status(C.mb_bind_output_to_device(binding, cName, info))
}

func clearBoundOutputs(binding unsafe.Pointer) { C.mb_clear_outputs(binding) }

func bindOutput(binding unsafe.Pointer, name string, value unsafe.Pointer) error {
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	return status(C.mb_bind_output(binding, cName, value))
}

// runWithBinding runs with the bound inputs and outputs; options (OrtRunOptions) may be nil.
func runWithBinding(session, binding, options unsafe.Pointer) error {
	return status(C.mb_run(session, binding, options))
}

// newRunOptions makes run options with one config entry (key = value).
func newRunOptions(key, value string) (unsafe.Pointer, error) {
	cKey, cValue := C.CString(key), C.CString(value)
	defer C.free(unsafe.Pointer(cKey))
	defer C.free(unsafe.Pointer(cValue))
	var out unsafe.Pointer
	err := status(C.mb_run_options(cKey, cValue, &out))
	return out, err
}

func releaseRunOptions(options unsafe.Pointer) { C.mb_release_run_options(options) }

// newAllocator is the session's allocator for the memory info's device; release it after the
// tensors it made.
func newAllocator(session, info unsafe.Pointer) (unsafe.Pointer, error) {
	var out unsafe.Pointer
	err := status(C.mb_allocator(session, info, &out))
	return out, err
}

func releaseAllocator(allocator unsafe.Pointer) { C.mb_release_allocator(allocator) }

// newTensor allocates a tensor (element type elemFloat, elemDouble or elemInt64) from allocator.
func newTensor(allocator unsafe.Pointer, shape []int64, typ int) (unsafe.Pointer, error) {
	var dims *C.int64_t // a scalar's shape is empty
	if len(shape) > 0 {
		dims = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	var out unsafe.Pointer
	err := status(C.mb_tensor(allocator, dims, C.size_t(len(shape)), C.int(typ), &out))
	return out, err
}

// boundOutputs are the values of the last run's outputs, each the caller's to release (at most
// max kept, the rest released).
func boundOutputs(binding unsafe.Pointer, max int) ([]unsafe.Pointer, error) {
	out := make([]unsafe.Pointer, max+1)
	var count C.size_t
	if err := status(C.mb_outputs(binding, &out[0], C.size_t(max), &count)); err != nil {
		return nil, err
	}
	return out[:min(int(count), max)], nil
}

func releaseValue(v unsafe.Pointer) { C.mb_release_value(v) }

// tensorData is a tensor's data pointer, element type and element count.
func tensorData(v unsafe.Pointer) (unsafe.Pointer, int, int, error) {
	var data unsafe.Pointer
	var typ C.int
	var n C.size_t
	err := status(C.mb_tensor_data(v, &data, &typ, &n))
	return data, int(typ), int(n), err
}
