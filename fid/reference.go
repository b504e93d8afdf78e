package fid

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"codeberg.org/sbinet/npyio/npy"
	"codeberg.org/sbinet/npyio/npz"
)

// ReadReference reads FID reference statistics from an .npz: `mu` and `sigma` when present
// (any FID tool's statistics; ADM's reference batches such as VIRTUAL_imagenet256_labeled.npz
// carry them beside their images), else the images of `arr_0` (ADM's layout: uint8
// [N,H,W,C], C 1 or 3) run through the evaluator that evaluator() opens, only then.
func ReadReference(path string, evaluator func() (*Evaluator, error), progress func(done, total int)) (*Stats, error) {
	f, err := npz.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read statistics: %v", path, err)
	}
	defer f.Close()
	keys := f.Keys()
	switch {
	case slices.Contains(keys, "mu.npy") || slices.Contains(keys, "sigma.npy"):
		return ReadStats(path)
	case !slices.Contains(keys, "arr_0.npy"):
		return nil, fmt.Errorf("%s has neither mu and sigma nor arr_0 images (its arrays: %s)", path, npzMembers(keys))
	}
	e, err := evaluator()
	if err != nil {
		return nil, err
	}
	acc, err := arrayStats(f, path, e, progress)
	if err != nil {
		return nil, err
	}
	sigma, err := acc.Covariance()
	if err != nil {
		return nil, fmt.Errorf("%s arr_0: %v", path, err)
	}
	return &Stats{Mu: acc.Mean, Sigma: sigma}, nil
}

// arrayStats streams arr_0 a batch at a time: ADM's 10,000 images at 256x256 are 2 GB.
func arrayStats(f *npz.Reader, path string, e *Evaluator, progress func(done, total int)) (*Accumulator, error) {
	rc, err := f.Open("arr_0.npy")
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	defer rc.Close()
	r, err := npy.NewReader(rc)
	if err != nil {
		return nil, fmt.Errorf("%s arr_0: %v", path, err)
	}
	d := r.Header.Descr
	if dtype := strings.Trim(d.Type, `'"`); (dtype != "|u1" && dtype != "u1") || d.Fortran || len(d.Shape) != 4 || (d.Shape[3] != 1 && d.Shape[3] != 3) || d.Shape[1] < 1 || d.Shape[2] < 1 {
		return nil, fmt.Errorf("%s arr_0 is %s %v%s; reference images must be uint8 [N,H,W,C] in C order with C 1 or 3 (ADM's layout)",
			path, d.Type, d.Shape, map[bool]string{true: " in Fortran order"}[d.Fortran])
	}
	n, h, w, c := d.Shape[0], d.Shape[1], d.Shape[2], d.Shape[3]
	if c != 1 && c != e.Manifest.Input.Channels {
		return nil, fmt.Errorf("%s arr_0 has %d channels, the evaluator takes %d", path, c, e.Manifest.Input.Channels)
	}
	acc := NewAccumulator(e.Manifest.Features.Dim)
	raw := make([]uint8, h*w*c)
	for start := 0; start < n; start += evalBatch {
		end := min(start+evalBatch, n)
		batch := make([]Image, 0, end-start)
		for i := start; i < end; i++ {
			if _, err := io.ReadFull(rc, raw); err != nil {
				return nil, fmt.Errorf("%s arr_0: image %d of %d unreadable: %v", path, i, n, err)
			}
			batch = append(batch, Image{Pix: planar(raw, h, w, c), Height: h, Width: w, Channels: c})
		}
		feats, _, err := e.EvaluateImages(batch)
		if err != nil {
			return nil, fmt.Errorf("%s arr_0 from image %d: %v", path, start, err)
		}
		for i, ft := range feats {
			if err := acc.Add(ft); err != nil {
				return nil, fmt.Errorf("%s arr_0 image %d: %v", path, start+i, err)
			}
		}
		if progress != nil {
			progress(end, n)
		}
	}
	return acc, nil
}

// planar turns interleaved [H][W][C] pixels into [C][H][W].
func planar(hwc []uint8, h, w, c int) []uint8 {
	out := make([]uint8, len(hwc))
	for p := 0; p < h*w; p++ {
		for ch := 0; ch < c; ch++ {
			out[ch*h*w+p] = hwc[p*c+ch]
		}
	}
	return out
}

// npzMembers names an archive's arrays for errors.
func npzMembers(keys []string) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = strings.TrimSuffix(k, ".npy")
	}
	return strings.Join(names, ", ")
}
