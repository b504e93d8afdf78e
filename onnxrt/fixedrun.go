package onnxrt

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"
)

// FixedRun runs a graph at one shape with every input and output bound, once, to a tensor on
// the session's device that stays where it is for the runner's life: what a CUDA graph needs,
// since a replay reads and writes the device addresses its capture saw (SessionOptions.CUDAGraph).
// Each Run copies the caller's Go data into the fixed inputs, runs, and copies the fixed outputs
// back to Go memory. The copies are runs of a second session on the same device, an Identity
// graph per direction whose output is bound to the destination tensor (copyModel): the C API
// has a device copy, CopyTensors, but only for providers registered with the environment as
// plugins, not for the CUDA provider appended to session options as marspec does. On the CPU
// "the device" is CPU memory and the same calls run, so CPU tests exercise the GPU's code.
//
// A FixedRun is for one caller at a time; the graph's Close releases runners still open.
type FixedRun struct {
	g    *Graph
	dims Dims
	// graphID is the run option gpu_graph_id: one CUDA graph per id, captured on the id's first
	// runs and replayed after; -1 runs without capture (past maxCapturedShapes)
	graphID int
	mu      sync.Mutex // guards the rest against Close
	// host are the Go-memory tensors the caller fills (in) and reads (out)
	host *boundTensors
	// alloc is the session's allocator of its device; dev the fixed tensors it made: the
	// graph's inputs, then its outputs
	alloc unsafe.Pointer
	dev   []unsafe.Pointer
	// the IO bindings of the graph, of the upload copy and of the download copy, and the
	// copies' graphs (the graph's copyUp and copyDown)
	run, up, down      unsafe.Pointer
	upGraph, downGraph *Graph
	options            unsafe.Pointer // run options carrying graphID
}

// maxCapturedShapes bounds the CUDA graphs one session captures. ONNX Runtime (1.18 on) keeps
// several per session, told apart by the run option gpu_graph_id, and they share the session's
// weights, where a session per shape would load the weights again for each. An id is never
// handed out twice: a replay under a reused id would read the old runner's addresses. Shapes
// past the cap run uncaptured (id -1) through the same fixed-address path.
var maxCapturedShapes = 16

// FixedStats counts, over the process, fixed-address runners opened, the device tensors they
// allocated and their runs: tests check that runs allocate nothing.
type FixedStats struct{ Runners, Allocs, Runs int64 }

var fixedCounts struct{ runners, allocs, runs atomic.Int64 }

// ReadFixedStats returns the process's counts so far.
func ReadFixedStats() FixedStats {
	return FixedStats{fixedCounts.runners.Load(), fixedCounts.allocs.Load(), fixedCounts.runs.Load()}
}

// Fixed opens a runner of the graph at these dynamic sizes (as RunDims takes them). Close it
// when done.
func (g *Graph) Fixed(dims Dims) (*FixedRun, error) {
	g.open.RLock()
	defer g.open.RUnlock()
	switch {
	case g.session == nil:
		return nil, fmt.Errorf("%s: used after Close", g.source)
	case dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || dims[3] < 1:
		return nil, fmt.Errorf("%s: dynamic sizes %v, want at least 1", g.source, dims)
	}
	if err := capi(); err != nil {
		return nil, fmt.Errorf("%s: fixed-address run: %v", g.source, err)
	}
	up, down, err := g.copyGraphs()
	if err != nil {
		return nil, err
	}
	host, err := g.take(dims)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", g.source, err)
	}
	f := &FixedRun{g: g, dims: dims, graphID: -1, host: host, upGraph: up, downGraph: down}
	g.mu.Lock()
	if g.graphIDs < maxCapturedShapes {
		g.graphIDs++ // from 1: ONNX Runtime keeps id 0 for runs that name none
		f.graphID = g.graphIDs
	}
	g.mu.Unlock()
	if err := f.open(); err != nil {
		f.release()
		return nil, fmt.Errorf("%s: fixed-address run: %v", g.source, err)
	}
	g.mu.Lock()
	g.fixed[f] = struct{}{}
	g.mu.Unlock()
	fixedCounts.runners.Add(1)
	return f, nil
}

// copyGraphs opens, on the graph's first Fixed, the sessions that copy its inputs in and its
// outputs out (g.open held for reading).
func (g *Graph) copyGraphs() (up, down *Graph, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.copyUp == nil {
		// no graph optimisation: it would drop the Identity nodes, and the copies with them
		opt := SessionOptions{Device: g.device, IntraOpThreads: 1, Tuning: Tuning{GraphOpt: "off"}}
		open := func(specs []IOSpec, what string) (*Graph, error) {
			ins, outs := copySpecs(specs)
			return NewGraph(copyModel(specs), g.source+" ("+what+" copy)", opt, ins, outs)
		}
		if g.copyUp, err = open(g.inputs, "input"); err != nil {
			return nil, nil, err
		}
		if g.copyDown, err = open(g.outputs, "output"); err != nil {
			g.copyUp.Close()
			g.copyUp = nil
			return nil, nil, err
		}
	}
	return g.copyUp, g.copyDown, nil
}

// open allocates the fixed tensors and binds them where they stay.
func (f *FixedRun) open() error {
	g := f.g
	session, err := sessionPointer(g.session)
	if err != nil {
		return err
	}
	info, err := memoryInfo(g.device)
	if err != nil {
		return err
	}
	f.alloc, err = newAllocator(session, info)
	releaseMemoryInfo(info)
	if err != nil {
		return err
	}
	specs := append(append([]IOSpec{}, g.inputs...), g.outputs...)
	for _, s := range specs {
		v, err := newTensor(f.alloc, s.at(f.dims), elemType(s))
		if err != nil {
			return fmt.Errorf("allocating %s: %v", s.Name, err)
		}
		f.dev = append(f.dev, v)
		fixedCounts.allocs.Add(1)
	}
	nIn := len(g.inputs)
	if f.run, err = createBinding(session); err != nil {
		return err
	}
	for i, s := range specs {
		if i < nIn {
			err = bindInput(f.run, s.Name, f.dev[i])
		} else {
			err = bindOutput(f.run, s.Name, f.dev[i])
		}
		if err != nil {
			return fmt.Errorf("binding %s: %v", s.Name, err)
		}
	}
	// the upload's outputs and the download's inputs and outputs stay bound; each Run binds
	// only the upload's inputs, the Go tensors, which a CUDA session copies when they are bound
	if f.up, err = bindCopy(f.upGraph, nil, f.dev[:nIn]); err != nil {
		return err
	}
	outs := make([]unsafe.Pointer, len(f.host.out))
	for i, t := range f.host.out {
		if outs[i], err = valuePointer(t); err != nil {
			return err
		}
	}
	if f.down, err = bindCopy(f.downGraph, f.dev[nIn:], outs); err != nil {
		return err
	}
	f.options, err = newRunOptions("gpu_graph_id", strconv.Itoa(f.graphID))
	return err
}

// bindCopy opens a binding on a copy graph with input i bound to ins[i] (none if ins is nil)
// and output i to outs[i].
func bindCopy(c *Graph, ins, outs []unsafe.Pointer) (unsafe.Pointer, error) {
	session, err := sessionPointer(c.session)
	if err != nil {
		return nil, err
	}
	b, err := createBinding(session)
	if err != nil {
		return nil, err
	}
	for i, v := range ins {
		if err = bindInput(b, c.inputs[i].Name, v); err != nil {
			break
		}
	}
	for i, v := range outs {
		if err != nil {
			break
		}
		err = bindOutput(b, c.outputs[i].Name, v)
	}
	if err != nil {
		releaseBinding(b)
		return nil, err
	}
	return b, nil
}

// GraphID is the CUDA graph id the runner's runs carry: 1 and up, or -1 where the session's
// cap on captured shapes was reached (then nothing is captured; the same id is given on the
// CPU, where nothing ever is).
func (f *FixedRun) GraphID() int { return f.graphID }

// Run lets fill write the inputs (Go memory, the shape of the runner's sizes), copies them into
// the fixed tensors, runs the graph, copies its outputs back and lets read take them. The
// slices fill and read see are valid only during the callback; errors get the source prefix.
func (f *FixedRun) Run(fill func(in Tensors) error, read func(out Tensors) error) error {
	g := f.g
	g.open.RLock()
	defer g.open.RUnlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if g.session == nil || f.run == nil {
		return fmt.Errorf("%s: fixed-address run used after Close", g.source)
	}
	if err := fill(Tensors(f.host.in)); err != nil {
		return fmt.Errorf("%s: %v", g.source, err)
	}
	for i, t := range f.host.in {
		v, err := valuePointer(t)
		if err == nil {
			err = bindInput(f.up, f.upGraph.inputs[i].Name, v)
		}
		if err != nil {
			return fmt.Errorf("%s: binding input %s: %v", g.source, g.inputs[i].Name, err)
		}
	}
	steps := []struct {
		c             *Graph
		binding, opts unsafe.Pointer
		what          string
	}{{f.upGraph, f.up, nil, "copying the inputs in"}, {g, f.run, f.options, "run"}, {f.downGraph, f.down, nil, "copying the outputs out"}}
	for _, s := range steps {
		session, err := sessionPointer(s.c.session)
		if err == nil {
			err = runWithBinding(session, s.binding, s.opts)
		}
		if err != nil {
			return fmt.Errorf("%s: %s failed: %v", g.source, s.what, oneLine(err))
		}
	}
	fixedCounts.runs.Add(1)
	if err := read(Tensors(f.host.out)); err != nil {
		return fmt.Errorf("%s: %v", g.source, err)
	}
	return nil
}

// Close releases the runner's tensors and bindings. Safe to call twice, and after the graph's
// Close (which released it).
func (f *FixedRun) Close() error {
	f.mu.Lock()
	f.release()
	f.mu.Unlock()
	f.g.mu.Lock() // after f.mu is let go: the graph's Close takes them the other way round
	delete(f.g.fixed, f)
	f.g.mu.Unlock()
	return nil
}

// release frees what the runner holds (f.mu held, or f not yet shared): the bindings before
// the tensors they hold, the tensors before the allocator that made them.
func (f *FixedRun) release() {
	for _, b := range []*unsafe.Pointer{&f.run, &f.up, &f.down} {
		if *b != nil {
			releaseBinding(*b)
			*b = nil
		}
	}
	for _, v := range f.dev {
		releaseValue(v)
	}
	f.dev = nil
	if f.alloc != nil {
		releaseAllocator(f.alloc)
		f.alloc = nil
	}
	if f.options != nil {
		releaseRunOptions(f.options)
		f.options = nil
	}
	if f.host != nil {
		f.host.destroy()
		f.host = nil
	}
}

// closeFixed releases the runners still open and the copy graphs (g.open held for writing,
// before the session goes).
func (g *Graph) closeFixed() {
	g.mu.Lock()
	open := make([]*FixedRun, 0, len(g.fixed))
	for f := range g.fixed {
		open = append(open, f)
	}
	clear(g.fixed)
	up, down := g.copyUp, g.copyDown
	g.copyUp, g.copyDown = nil, nil
	g.mu.Unlock()
	for _, f := range open {
		f.mu.Lock()
		f.release()
		f.mu.Unlock()
	}
	for _, c := range []*Graph{up, down} {
		if c != nil {
			c.Close()
		}
	}
}
