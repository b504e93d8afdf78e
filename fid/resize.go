package fid

import "fmt"

// Resize modes an evaluator manifest may ask for (input.resize).
const (
	// ResizeNone: images must have the evaluator's size already.
	ResizeNone = ""
	// ResizeTF1Bilinear is TF1's tf.image.resize_bilinear with align_corners=False and
	// half_pixel_centers=False: what the 2015 Inception graph behind FID does to its input
	// (its ResizeBilinear node), so features match the published numbers' pipeline. The
	// resizer alone moves FID by points, hence one rule, stated exactly.
	ResizeTF1Bilinear = "tf1_bilinear"
)

// ResizeTF1 resizes one channel plane src [inH][inW] to [outH][outW] by TF1's legacy bilinear
// rule: output pixel y reads source row y*inH/outH (no half-pixel offset), interpolated
// between that row's floor and the next, clamped at the last; no anti-aliasing when
// shrinking. Values stay unrounded, as TF hands floats to the network.
func ResizeTF1(src []float32, inH, inW, outH, outW int, dst []float32) error {
	if inH < 1 || inW < 1 || outH < 1 || outW < 1 || len(src) != inH*inW || len(dst) != outH*outW {
		return fmt.Errorf("resize %dx%d (%d values) to %dx%d (%d values): sizes must be positive and match the buffers", inH, inW, len(src), outH, outW, len(dst))
	}
	x0, x1, xl := tf1Coords(inW, outW)
	y0, y1, yl := tf1Coords(inH, outH)
	for y := 0; y < outH; y++ {
		top, bottom := src[y0[y]*inW:(y0[y]+1)*inW], src[y1[y]*inW:(y1[y]+1)*inW]
		for x := 0; x < outW; x++ {
			// TF's order of operations: lerp along x on both rows, then along y
			t := top[x0[x]] + (top[x1[x]]-top[x0[x]])*xl[x]
			b := bottom[x0[x]] + (bottom[x1[x]]-bottom[x0[x]])*xl[x]
			dst[y*outW+x] = t + (b-t)*yl[y]
		}
	}
	return nil
}

// tf1Coords is, per output index, the two source indices and the weight of the second.
func tf1Coords(in, out int) (lo, hi []int, lerp []float32) {
	scale := float32(in) / float32(out)
	lo, hi, lerp = make([]int, out), make([]int, out), make([]float32, out)
	for i := range out {
		s := float32(i) * scale
		l := int(s) // s >= 0, so truncation is floor
		lo[i], hi[i], lerp[i] = l, min(l+1, in-1), s-float32(l)
	}
	return lo, hi, lerp
}
