package mar

import (
	"fmt"
	"os"
	"sync"

	"marspec/onnxrt"
)

// cudaGraphWanted says whether the fused head runs through fixed-address runners, captured as
// CUDA graphs where its graph allows (docs/gpu.md). Off until a GPU run has measured it;
// MARSPEC_CUDA_GRAPH=on turns it on. The CPU then runs the same fixed-address code with nothing
// captured, which is how tests cover it (TestImagesSameWithCUDAGraph).
func cudaGraphWanted() bool { return os.Getenv("MARSPEC_CUDA_GRAPH") == "on" }

// fixedLoops runs a fused head through one fixed-address runner per (n, steps, halves).
type fixedLoops struct {
	// mu lets one run through at a time: ONNX Runtime forbids concurrent runs on a session that
	// captures CUDA graphs, and a runner's buffers serve one caller
	mu      sync.Mutex
	runners map[onnxrt.Dims]*onnxrt.FixedRun
}

// captureOptions is newHeadLoop's hook. With the switch on, it returns the options the fused
// graph opens with, asking for CUDA graph capture unless the graph has a Loop or If node
// (head_loop.onnx's Loop: ONNX Runtime refuses to capture those; the unrolled graphs have
// none), and the runners RunLoop goes through. With it off: opt unchanged, no runners.
func captureOptions(opt onnxrt.SessionOptions, data []byte, file, source string) (onnxrt.SessionOptions, *fixedLoops, error) {
	if !cudaGraphWanted() {
		return opt, nil, nil
	}
	control, err := onnxrt.HasControlFlow(data, file)
	if err != nil {
		return opt, nil, fmt.Errorf("%s: not a readable ONNX model: %v", source, err)
	}
	opt.CUDAGraph = !control
	return opt, &fixedLoops{runners: map[onnxrt.Dims]*onnxrt.FixedRun{}}, nil
}

// run is RunLoop through the shape's runner, opened on the shape's first call. A shape past
// the session's cap on captured graphs gets a runner for the one call: it would gain nothing
// from keeping device buffers, and the shapes a generation sees are few (one per tokens-per-step
// count and batch size).
func (f *fixedLoops) run(h *HeadLoop, n, steps, halves int, fill func(LoopInputs), read func(LoopOutputs)) error {
	dims := onnxrt.Dims{n, steps, halves, 1}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runners[dims]
	if r == nil {
		var err error
		if r, err = h.Fixed(dims); err != nil {
			return err
		}
		if r.GraphID() > 0 {
			f.runners[dims] = r // the graph's Close releases it
		} else {
			defer r.Close()
		}
	}
	return r.Run(func(in onnxrt.Tensors) error {
		fill(loopInputs(in))
		return nil
	}, func(out onnxrt.Tensors) error {
		read(loopOutputs(out))
		return nil
	})
}
