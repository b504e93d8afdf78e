package mar

import (
	"slices"
	"testing"

	"marspec/onnxrt"
)

// Whole images on the embedded target pack's fused head are identical with MARSPEC_CUDA_GRAPH
// on and off, guided and unguided: on the CPU the switch runs the fixed-address path a GPU
// would capture (every head call through it, allocating nothing after a shape's first call),
// off it runs RunDims.
func TestImagesSameWithCUDAGraph(t *testing.T) {
	t.Setenv("MARSPEC_HEAD_LOOP", "on") // the CPU's default is the per-step head
	open := func(env string) *Model {
		t.Setenv("MARSPEC_CUDA_GRAPH", env)
		m := openPack(t, "../models/target")
		if loop := m.Head.(*ONNXHead).loop.ifOpened(); loop == nil || (loop.fixed != nil) != (env == "on") {
			t.Fatalf("MARSPEC_CUDA_GRAPH=%s: fused head %v, fixed-address runners %v", env, loop != nil, loop != nil && loop.fixed != nil)
		}
		return m
	}
	off, on := open("off"), open("on")
	for _, opt := range []Options{
		{Seed: 5, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, NumIter: 4, Steps: 20},
		{Seed: 6, CFG: 1, Temperature: 0.95, NumIter: 4, Steps: 20},
	} {
		classes := []int{1, 3}
		want, err := off.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		before := onnxrt.ReadFixedStats()
		got, err := on.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		after := onnxrt.ReadFixedStats()
		if runs := after.Runs - before.Runs; runs != int64(opt.NumIter) {
			t.Errorf("cfg %g: %d fixed-address head runs, want %d (one per AR step)", opt.CFG, runs, opt.NumIter)
		}
		for i := range want {
			if !slices.Equal(want[i].Tokens, got[i].Tokens) || !slices.Equal(want[i].Pixels, got[i].Pixels) {
				t.Errorf("cfg %g image %d: tokens or pixels differ with MARSPEC_CUDA_GRAPH on", opt.CFG, i)
			}
		}
		// the same shapes again reuse their runners' device tensors
		again := onnxrt.ReadFixedStats()
		if _, err := on.Generate(classes, opt); err != nil {
			t.Fatal(err)
		}
		if allocs := onnxrt.ReadFixedStats().Allocs - again.Allocs; allocs != 0 {
			t.Errorf("cfg %g: %d device tensors allocated by a repeated generation, want 0", opt.CFG, allocs)
		}
	}
}

// head_loop.onnx loops in a Loop node, which ONNX Runtime cannot capture: with the switch on it
// opens without capture (the fixed-address path still runs).
func TestHeadLoopNotCaptured(t *testing.T) {
	p, err := LoadPackDir("../models/target")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MARSPEC_CUDA_GRAPH", "on")
	opt, fixed, err := captureOptions(onnxrt.SessionOptions{Device: onnxrt.Device{CUDA: true}}, p.HeadLoop, p.HeadLoopFile, "head_loop.onnx")
	if err != nil || fixed == nil || opt.CUDAGraph {
		t.Errorf("captureOptions on head_loop.onnx: capture %v, runners %v, %v; want runners without capture", opt.CUDAGraph, fixed != nil, err)
	}
}
