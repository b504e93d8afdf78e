package mar

import (
	"errors"
	"fmt"
	"slices"
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

// loopShape is what an unrolled graph fixes: steps and halves, and the rows of the session
// it opens in (rows 0 in the pack's list: any).
type loopShape struct{ steps, halves, rows int }

// unrolledLoops are a pack's unrolled graphs, each opened once per row count it is called
// with, rounded up to a power of two: ONNX Runtime opens a graph of thousands of nodes
// quickly only when every shape in it is known (onnxrt.SessionOptions.FixedDims), a CUDA
// graph needs fixed shapes too, and MAR's schedule gives each AR step its own token count.
// Rows past a call's own are zeros, which the head maps row by row: they change no real row.
type unrolledLoops struct {
	pack  *Pack
	opt   onnxrt.SessionOptions
	graph map[loopShape]unrolledGraph // by steps and halves (rows 0)
	mu    sync.Mutex
	open  map[loopShape]*lazyLoop // nil once closed
}

// has reports whether a graph is unrolled for steps and halves.
func (u *unrolledLoops) has(steps, halves int) bool {
	_, ok := u.graph[loopShape{steps, halves, 0}]
	return ok
}

// session is the graph for steps and halves opened for rows, opened on first use.
func (u *unrolledLoops) session(steps, halves, rows int) (*HeadLoop, error) {
	spec := u.graph[loopShape{steps, halves, 0}]
	key := loopShape{steps, halves, rows}
	u.mu.Lock()
	if u.open == nil {
		u.mu.Unlock()
		return nil, fmt.Errorf("%s/%s: used after Close", u.pack.Source, spec.File)
	}
	l := u.open[key]
	if l == nil {
		opt := u.opt
		opt.FixedDims = append(slices.Clone(opt.FixedDims), onnxrt.FixedDim{Name: "N", Size: int64(rows)})
		l = &lazyLoop{open: func() (*HeadLoop, error) {
			return newHeadLoopFixed(spec.data, spec.file, u.pack.Manifest, opt,
				fmt.Sprintf("%s/%s (%d rows)", u.pack.Source, spec.File, rows), steps, halves)
		}}
		u.open[key] = l
	}
	u.mu.Unlock()
	return l.get()
}

func (u *unrolledLoops) close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var err error
	for _, l := range u.open {
		if cerr := l.close(); err == nil {
			err = cerr
		}
	}
	u.open = nil
	return err
}

// unrolledRows is the row count of the session a call of n rows runs in.
func unrolledRows(n int) int {
	rows := 1
	for rows < n {
		rows *= 2
	}
	return rows
}

// fusedLoops is the head's fused reverse diffusion: the rolled graph (any step count) and the
// unrolled ones, each for one step count and guidance, taken where one fits the call. The head
// hands it out only once rolled has opened.
type fusedLoops struct {
	rolled   *lazyLoop
	unrolled *unrolledLoops
}

func (f *fusedLoops) RunLoop(n, steps, halves int, fill func(LoopInputs), read func(LoopOutputs)) error {
	if !f.unrolled.has(steps, halves) {
		rolled, err := f.rolled.get()
		if err != nil {
			return err
		}
		return rolled.RunLoop(n, steps, halves, fill, read)
	}
	rows := unrolledRows(n)
	g, err := f.unrolled.session(steps, halves, rows)
	if err != nil {
		return err
	}
	if rows == n {
		return g.RunLoop(n, steps, halves, fill, read)
	}
	return runPadded(g, n, rows, steps, halves, fill, read)
}

// runPadded runs n rows in a session of more rows: fill writes n rows into buffers of their
// own, which go to the session's first n rows; the rest are zeros (guidance 1); read gets the
// first n rows of each output.
func runPadded(g *HeadLoop, n, rows, steps, halves int, fill func(LoopInputs), read func(LoopOutputs)) error {
	D, W := g.dim, g.width
	in := LoopInputs{XT: make([]float64, n*D), Noise: make([]float64, steps*n*D), Z: make([]float32, halves*n*W),
		CFG: make([]float64, n), T: make([]float32, steps), Coef: make([]float64, steps*numCoefs), Clip: make([]float64, 2)}
	fill(in)
	return g.RunLoop(rows, steps, halves, func(p LoopInputs) {
		padRows(p.XT, in.XT, 1, n, rows, D)
		padRows(p.Noise, in.Noise, steps, n, rows, D)
		padRows(p.Z, in.Z, halves, n, rows, W)
		copy(p.CFG, in.CFG)
		for i := n; i < rows; i++ {
			p.CFG[i] = 1
		}
		copy(p.T, in.T)
		copy(p.Coef, in.Coef)
		copy(p.Clip, in.Clip)
	}, func(p LoopOutputs) {
		out := LoopOutputs{X0: p.X0[:n*D], LastMean: p.LastMean[:n*D], HalfLogVar: make([]float64, steps*n*D)}
		for s := range steps {
			copy(out.HalfLogVar[s*n*D:(s+1)*n*D], p.HalfLogVar[s*rows*D:])
		}
		read(out)
	})
}

// padRows copies blocks of n rows of width w from src into blocks of rows rows in dst and
// zeroes the rest of each block.
func padRows[T float32 | float64](dst, src []T, blocks, n, rows, w int) {
	for b := range blocks {
		copy(dst[b*rows*w:], src[b*n*w:(b+1)*n*w])
		clear(dst[(b*rows+n)*w : (b+1)*rows*w])
	}
}

// unrolledWanted decides whether the fused head takes an unrolled graph where one fits.
// MARSPEC_HEAD_UNROLLED=on or off overrides (the tokens are the same either way,
// TestUnrolledMatchesLoop).
func unrolledWanted(dev onnxrt.Device) bool {
	return onCUDAUnless("MARSPEC_HEAD_UNROLLED", dev)
}

// unrolledLoops are the pack's unrolled graphs for the head, or nil when it has none.
func (p *Pack) unrolledLoops(opt onnxrt.SessionOptions) *unrolledLoops {
	if len(p.unrolled) == 0 {
		return nil
	}
	u := &unrolledLoops{pack: p, opt: opt, graph: map[loopShape]unrolledGraph{}, open: map[loopShape]*lazyLoop{}}
	for _, g := range p.unrolled {
		u.graph[loopShape{g.Steps, g.halves(), 0}] = g
	}
	return u
}

// UnrolledSessions names the unrolled graphs the head has opened so far, each with the rows
// of its session ("head_loop.guided100.onnx (8 rows)"), sorted: bench and tests read which
// graph served the fused head.
func (h *ONNXHead) UnrolledSessions() []string {
	if h.unrolled == nil {
		return nil
	}
	u := h.unrolled
	u.mu.Lock()
	defer u.mu.Unlock()
	var names []string
	for key, l := range u.open {
		if l.ifOpened() != nil {
			names = append(names, fmt.Sprintf("%s (%d rows)", u.graph[loopShape{key.steps, key.halves, 0}].File, key.rows))
		}
	}
	slices.Sort(names)
	return names
}

// PrepareUnrolled opens the unrolled fused head sessions that generating batches of batch
// images at opt (validated: num_iter, steps, guidance) will call, and runs each once on zeros
// (with MARSPEC_CUDA_GRAPH=on that run captures its CUDA graph), so that a timed generation
// meets no session to open. Nothing to do where the head has no unrolled graph for opt.
func (m *Model) PrepareUnrolled(opt Options, batch int) error {
	h, ok := m.Head.(*ONNXHead)
	halves := condHalves(opt.guided())
	if !ok || h.unrolled == nil || !h.unrolled.has(opt.Steps, halves) || batch < 1 {
		return nil
	}
	numIter := opt.NumIter
	if numIter == 0 {
		numIter = m.Manifest.SeqLen()
	}
	var counts []int
	for _, size := range StepSizes(m.Manifest.SeqLen(), numIter) {
		if rows := unrolledRows(size * batch); !slices.Contains(counts, rows) {
			counts = append(counts, rows)
		}
	}
	// Opened side by side: a session of a MAR-B graph unrolled for 100 steps takes seconds to
	// plan, one core each, and a GPU machine has cores to spare.
	sessions := make([]*HeadLoop, len(counts))
	errs := make([]error, len(counts))
	var wg sync.WaitGroup
	for i, rows := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sessions[i], errs[i] = h.unrolled.session(opt.Steps, halves, rows)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, rows := range counts {
		g := sessions[i]
		if err := g.RunLoop(rows, opt.Steps, halves, func(in LoopInputs) {
			for _, s := range [][]float64{in.XT, in.Noise, in.CFG, in.Coef, in.Clip} {
				clear(s)
			}
			clear(in.Z)
			clear(in.T)
		}, func(LoopOutputs) {}); err != nil {
			return err
		}
	}
	return nil
}
