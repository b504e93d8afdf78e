package fid

import (
	"fmt"
	"strings"
)

// Comparison is `marspec fid A B`: FID between two sides (folders of PNG images, .npz
// statistics, or .npz images in ADM's arr_0 layout) and IS of the first side, or why IS is left out.
type Comparison struct {
	FID float64
	IS  string // "IS of A: m ± s (10 splits, shuffled)" or "IS left out: <why>"
}

// ISSplits is how many parts IS averages over, as the field reports it.
const ISSplits = 10

// Compare featurizes the folders among a and b with the evaluator open gives (opened only if
// a folder needs it; features reports each folder's progress) and compares them.
func Compare(open func() (*Evaluator, error), a, b string, features func(dir string) func(done, total int)) (Comparison, error) {
	var e *Evaluator
	// the evaluator opens once, and only for a folder or an .npz of images (ADM's arr_0)
	opened := func() (*Evaluator, error) {
		if e == nil {
			var err error
			if e, err = open(); err != nil {
				return nil, err
			}
		}
		return e, nil
	}
	load := func(p string) (*Stats, [][]float64, error) {
		var progress func(done, total int)
		if features != nil {
			progress = features(p)
		}
		if strings.HasSuffix(p, ".npz") {
			s, err := ReadReference(p, opened, progress)
			return s, nil, err
		}
		if _, err := opened(); err != nil {
			return nil, nil, err
		}
		acc, probs, err := FolderStats(e, p, progress)
		if err != nil {
			return nil, nil, err
		}
		sigma, err := acc.Covariance()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", p, err)
		}
		return &Stats{Mu: acc.Mean, Sigma: sigma}, probs, nil
	}
	sa, probsA, err := load(a)
	if err != nil {
		return Comparison{}, err
	}
	sb, _, err := load(b)
	if err != nil {
		return Comparison{}, err
	}
	d, err := Frechet(sa.Mu, sa.Sigma, sb.Mu, sb.Sigma)
	if err != nil {
		return Comparison{}, fmt.Errorf("FID between %s and %s: %v", a, b, err)
	}
	return Comparison{FID: d, IS: inceptionScoreLine(a, probsA)}, nil
}

// inceptionScoreLine is IS of the first side, or why it is left out.
func inceptionScoreLine(name string, probs [][]float64) string {
	switch {
	case strings.HasSuffix(name, ".npz"):
		return fmt.Sprintf("IS left out: %s is a statistics file, and IS needs each image's class probabilities", name)
	case len(probs) < ISSplits:
		return fmt.Sprintf("IS left out: %s has %d images, and IS needs at least %d (one per split)", name, len(probs), ISSplits)
	}
	m, s, err := ShuffledInceptionScore(probs, ISSplits, 0)
	if err != nil {
		return fmt.Sprintf("IS left out: %v", err)
	}
	return fmt.Sprintf("IS of %s: %.4f ± %.4f (%d splits, shuffled)", name, m, s, ISSplits)
}
