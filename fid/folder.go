package fid

import "fmt"

// evalBatch is how many images go through the evaluator at once.
const evalBatch = 256

// FolderStats streams a folder of PNGs through the evaluator into feature statistics and
// class probabilities (kept for IS, which needs them all: classes x images floats).
func FolderStats(e *Evaluator, dir string, progress func(done, total int)) (*Accumulator, [][]float64, error) {
	files, err := ImageFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	in := e.Manifest.Input
	if in.Channels != 1 && in.Channels != 3 {
		return nil, nil, fmt.Errorf("evaluator takes %d channels; PNG folders give 1 or 3", in.Channels)
	}
	acc := NewAccumulator(e.Manifest.Features.Dim)
	var probs [][]float64
	for start := 0; start < len(files); start += evalBatch {
		end := min(start+evalBatch, len(files))
		batch := make([]Image, 0, end-start)
		for _, f := range files[start:end] {
			im, err := ReadImage(f, in.Channels)
			if err != nil {
				return nil, nil, err
			}
			if err := e.Accepts(im); err != nil {
				return nil, nil, fmt.Errorf("%s: %v", f, err)
			}
			batch = append(batch, im)
		}
		feats, p, err := e.EvaluateImages(batch)
		if err != nil {
			return nil, nil, err
		}
		for i, f := range feats {
			if err := acc.Add(f); err != nil {
				return nil, nil, fmt.Errorf("%s: %v", files[start+i], err)
			}
		}
		probs = append(probs, p...)
		if progress != nil {
			progress(end, len(files))
		}
	}
	return acc, probs, nil
}
