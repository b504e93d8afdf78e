package onnxrt

import "golang.org/x/sys/cpu"

// Int8ToleranceRMS is how far, in RMS relative to the fp32 output's, a graph with int8 weights
// may be expected to move from its fp32 graph on this CPU: 0.03 with VNNI, 0.15 without. On
// AVX2 alone ONNX Runtime's u8 x s8 kernel adds products pairwise into int16, which saturates
// (with a scale per row, 10.5 and 11.8% measured on the embedded target's transformer and
// head, against 1.2 and 0.7% with VNNI; docs/BENCHMARKS.md, "int8 on the CPU").
func Int8ToleranceRMS() float64 {
	if cpu.X86.HasAVX512VNNI || cpu.X86.HasAVXVNNI {
		return 0.03
	}
	return 0.15
}
