package mar

import (
	"fmt"
	"os"
	"sync"

	"marspec/onnxrt"
)

// UnrolledLoop names one unrolled fused head graph in a pack (scripts/packs/unroll_head.py):
// head_loop.onnx's computation with its Loop repeated once per step for one step count, and
// for guided or unguided runs only, so no control flow is left (CUDA can capture it as one
// CUDA graph, and ONNX Runtime pays no per-iteration cost).
type UnrolledLoop struct {
	File   string `json:"file"`
	Steps  int    `json:"steps"`
	Guided bool   `json:"guided"`
}

// halves is the graph's fixed G: 2 under guidance (cond rows, then uncond rows), else 1.
func (u UnrolledLoop) halves() int {
	if u.Guided {
		return 2
	}
	return 1
}

// validateUnrolled checks a list of unrolled graphs: file names in the pack, step counts the
// schedule allows, at most one graph per step count and guidance.
func validateUnrolled(m *Manifest, where string, list []UnrolledLoop) error {
	seen := map[UnrolledLoop]bool{}
	for _, u := range list {
		switch {
		case !isPackFileName(u.File):
			return fmt.Errorf("%s: file %q must be a file name in the pack folder ending in .onnx", where, u.File)
		case u.Steps < 1 || u.Steps > m.Diffusion.TrainingSteps:
			return fmt.Errorf("%s: %s has steps %d (allowed: 1 to training_steps %d)", where, u.File, u.Steps, m.Diffusion.TrainingSteps)
		}
		key := UnrolledLoop{Steps: u.Steps, Guided: u.Guided}
		if seen[key] {
			return fmt.Errorf("%s: two graphs for %d steps guided=%v", where, u.Steps, u.Guided)
		}
		seen[key] = true
	}
	return nil
}

// unrolledGraph is one unrolled graph of a loaded pack: its bytes, or its path on disk.
type unrolledGraph struct {
	UnrolledLoop
	data []byte
	file string
}

// loopShape is what an unrolled graph fixes: steps, and halves.
type loopShape struct{ steps, halves int }

// lazyLoop is a fused head graph opened on first use (or at open, where sampling uses it).
type lazyLoop struct {
	open func() (*HeadLoop, error)
	once sync.Once
	g    *HeadLoop
	err  error
}

func (l *lazyLoop) get() (*HeadLoop, error) {
	l.once.Do(func() { l.g, l.err = l.open() })
	return l.g, l.err
}

func (l *lazyLoop) close() error {
	l.once.Do(func() {}) // after Close nothing opens
	if l.g != nil {
		return l.g.Close()
	}
	return nil
}

// fusedLoops is the head's fused reverse diffusion: the rolled graph (any step count) and the
// unrolled ones, each for one step count and guidance, taken where one fits the call.
type fusedLoops struct {
	rolled   *HeadLoop
	unrolled map[loopShape]*lazyLoop
}

func (f *fusedLoops) RunLoop(n, steps, halves int, fill func(LoopInputs), read func(LoopOutputs)) error {
	if l := f.unrolled[loopShape{steps, halves}]; l != nil {
		g, err := l.get()
		if err != nil {
			return err
		}
		return g.RunLoop(n, steps, halves, fill, read)
	}
	return f.rolled.RunLoop(n, steps, halves, fill, read)
}

// unrolledWanted decides whether the fused head takes an unrolled graph where one fits.
// MARSPEC_HEAD_UNROLLED=on or off overrides (the tokens are the same either way,
// TestUnrolledMatchesLoop).
func unrolledWanted(dev onnxrt.Device) bool {
	switch os.Getenv("MARSPEC_HEAD_UNROLLED") {
	case "on":
		return true
	case "off":
		return false
	}
	return dev.CUDA
}

// openUnrolled prepares the pack's unrolled graphs for the head, opened now when open is set.
func (p *Pack) openUnrolled(opt onnxrt.SessionOptions, open bool) (map[loopShape]*lazyLoop, error) {
	if len(p.unrolled) == 0 {
		return nil, nil
	}
	set := map[loopShape]*lazyLoop{}
	for _, u := range p.unrolled {
		u := u
		l := &lazyLoop{open: func() (*HeadLoop, error) {
			return newHeadLoopFixed(u.data, u.file, p.Manifest, opt, p.Source+"/"+u.File, u.Steps, u.halves())
		}}
		set[loopShape{u.Steps, u.halves()}] = l
		if open {
			if _, err := l.get(); err != nil {
				for _, o := range set {
					o.close()
				}
				return nil, err
			}
		}
	}
	return set, nil
}
