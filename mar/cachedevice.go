package mar

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"marspec/onnxrt"
)

// cacheOnDeviceWanted decides where the cache's K/V live: on CUDA in the GPU's memory, where
// each lazy call would otherwise copy every block's K/V of every image half across PCIe (47 MB
// a half at MAR-B; the cache's bottleneck on the H200 run of 2026-11-27); on the CPU in Go
// memory, where there is no copy to save. MARSPEC_CACHE_ON_DEVICE=on or off overrides either
// choice (the z are the same bit for bit, TestDeviceCacheMatchesHostCache), so CPU tests run
// the GPU's code.
func cacheOnDeviceWanted(dev onnxrt.Device) bool {
	return onCUDAUnless("MARSPEC_CACHE_ON_DEVICE", dev)
}

// deviceKV is an image half's K/V where the cached graph runs: encoder K/V [1, E, 2, S+1, W],
// encoder output [1, S+1, W], decoder K/V [1, Dd, 2, S+1, W]. Position S is a slot no call
// reads (its keep is 0): the rows of a call's padding queries are written there.
type deviceKV struct{ encKV, encOut, decKV *onnxrt.Value }

func (d *deviceKV) release() {
	if d != nil {
		d.encKV.Release()
		d.encOut.Release()
		d.decKV.Release()
	}
}

// Release frees what the image's cache holds on the device (nothing for a cache in Go
// memory). The image's next step under the cache must be a full pass.
func (c *ImageCache) Release() {
	for _, h := range c.halves {
		if h != nil {
			h.dev.release()
			h.dev = nil
		}
	}
}

// kvRanks are the ranks of the cache's three tensors, the groups of onnxrt's stack models, and
// kvSlotAxes their position axes, whose last entry is the slot no call reads.
var kvRanks, kvSlotAxes = []int{5, 3, 5}, []int{3, 1, 3}

type kvKind int

const (
	kvStack  kvKind = iota // the halves' tensors into one batch
	kvUpdate               // the batch's new rows into place, then back into halves
	kvFresh                // a full pass's rows into zeros, then into halves
)

// kvGraphs are the small graphs that move the cache on the device, one per kind and count of
// image halves in a call, opened on first use on the cached graph's device.
type kvGraphs struct {
	opt    onnxrt.SessionOptions
	source string
	mu     sync.Mutex
	graphs map[[2]int]*kvGraph
	clock  uint64
	closed bool
	opened map[kvKind]int // graphs opened so far, per kind (for tests)
}

type kvGraph struct {
	g     *onnxrt.Graph
	users int    // calls using it now
	used  uint64 // when it was last handed out
}

// kvKeepIdle is how many graphs of a kind stay open beside those a call is using or whose
// outputs still hold caches. Each is a session with its own pool of device memory, which keeps
// its high-water mark until the session closes: without a bound, a server whose calls carry
// many counts of image halves would keep a pool per count.
const kvKeepIdle = 2

func newKVGraphs(opt onnxrt.SessionOptions, source string) *kvGraphs {
	opt.CUDAGraph = false  // bound to other graphs' outputs: no fixed addresses
	opt.FixedDims = nil    // their axes are their own
	opt.IntraOpThreads = 1 // copies: no thread pool of their own beside the transformer's
	return &kvGraphs{opt: opt, source: source, graphs: map[[2]int]*kvGraph{}, opened: map[kvKind]int{}}
}

// get hands out the graph of kind for n image halves; done gives it back after the call.
func (k *kvGraphs) get(kind kvKind, n int) (g *onnxrt.Graph, done func(), err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, nil, errors.New("cache graphs used after Close")
	}
	key := [2]int{int(kind), n}
	e := k.graphs[key]
	if e == nil {
		if e, err = k.open(kind, n); err != nil {
			return nil, nil, err
		}
		k.graphs[key] = e
		k.opened[kind]++
	}
	k.clock++
	e.users, e.used = e.users+1, k.clock
	k.trim(kind)
	return e.g, func() {
		k.mu.Lock()
		e.users--
		k.mu.Unlock()
	}, nil
}

func (k *kvGraphs) open(kind kvKind, n int) (*kvGraph, error) {
	var model []byte
	var ins, outs []onnxrt.IOSpec
	var what string
	switch kind {
	case kvStack:
		model, what = onnxrt.StackModel(n, kvRanks, kvSlotAxes), "stacking"
		ins, outs = onnxrt.StackSpecs(n, kvRanks)
	default:
		fresh := kind == kvFresh
		model, what = onnxrt.ScatterSplitModel(n, kvRanks, fresh), "updating"
		ins, outs = onnxrt.ScatterSplitSpecs(n, kvRanks, fresh)
	}
	g, err := onnxrt.NewGraph(model, fmt.Sprintf("%s (%s the cache of %d image halves on the device)", k.source, what, n), k.opt, ins, outs)
	if err != nil {
		return nil, err
	}
	return &kvGraph{g: g}, nil
}

// trim closes the graphs of kind beyond the kvKeepIdle most recently used among the idle ones:
// no call is using them and no cache lives in their memory (k.mu held).
func (k *kvGraphs) trim(kind kvKind) {
	var idle [][2]int
	for key, e := range k.graphs {
		if key[0] == int(kind) && e.users == 0 && e.g.TakenValues() == 0 {
			idle = append(idle, key)
		}
	}
	if len(idle) <= kvKeepIdle {
		return
	}
	slices.SortFunc(idle, func(a, b [2]int) int { return cmp.Compare(k.graphs[b].used, k.graphs[a].used) })
	for _, key := range idle[kvKeepIdle:] {
		k.graphs[key].g.Close()
		delete(k.graphs, key)
	}
}

// counts are how many graphs of each kind are open now and have been opened (for tests).
func (k *kvGraphs) counts() (open, opened map[kvKind]int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	open = map[kvKind]int{}
	for key := range k.graphs {
		open[kvKind(key[0])]++
	}
	return open, maps.Clone(k.opened)
}

// close closes the graphs, which releases every cache still on the device.
func (k *kvGraphs) close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	var errs []error
	for _, e := range k.graphs {
		errs = append(errs, e.g.Close())
	}
	clear(k.graphs)
	return errors.Join(errs...)
}

// callOnDevice is call with the K/V kept where the graph runs: a lazy call stacks the units'
// caches into its inputs, and the queries' new K/V are written into them there. Only the
// small per-call inputs go up and only z comes back. Its shape is the Go-memory path's
// (callShape), so that both give the same z bit for bit.
func (t *CachedTransformer) callOnDevice(units []cacheUnit, full bool) error {
	B, S, W, L, D := len(units), t.S, t.W, t.L, t.D
	E, Dd := t.encBlocks, t.decBlocks
	for _, u := range units {
		if !full && (u.cache == nil || u.cache.dev == nil) {
			return fmt.Errorf("cache: a lazy call for an image half without K/V on the device (no full pass before it)")
		}
	}
	C, Q, R := t.callShape(units, full) // C = S: the graph sees the cache without its spare slot
	in := cachedInputs{B: B, C: C, Q: Q, R: R, S: S}
	in.fill(units, full, L, D)

	var stacked *onnxrt.Binding
	if !full {
		g, done, err := t.kv.get(kvStack, B)
		if err != nil {
			return err
		}
		defer done()
		if stacked, err = g.Bind(slices.Repeat([]bool{true}, 2*len(kvRanks))...); err != nil {
			return err
		}
		defer stacked.Close()
		for b, u := range units {
			d := u.cache.dev
			for j, v := range []*onnxrt.Value{d.encKV, d.encOut, d.decKV} {
				if err := stacked.SetValue(j*B+b, v); err != nil {
					return err
				}
			}
		}
		if err := stacked.Run(); err != nil {
			return err
		}
	}

	pass, err := t.g.Bind(false, true, true, true)
	if err != nil {
		return err
	}
	defer pass.Close()
	b64, c64, q64, r64 := int64(B), int64(C), int64(Q), int64(R)
	errs := []error{
		pass.SetInput(0, []int64{b64, int64(L), int64(D)}, in.tokens),
		pass.SetInput(1, []int64{b64, int64(L)}, in.mask),
		pass.SetInputInt64(2, []int64{b64}, in.class),
		pass.SetInput(3, []int64{b64}, in.drop),
		pass.SetInput(6, []int64{b64, c64}, in.encKeep),
		pass.SetInput(8, []int64{b64, c64}, in.decKeep),
		pass.SetInputInt64(9, []int64{b64, q64}, in.encPos),
		pass.SetInput(10, []int64{b64, q64}, in.encValid),
		pass.SetInputInt64(11, []int64{b64, r64}, in.decPos),
		pass.SetInput(12, []int64{b64, r64}, in.decValid),
		pass.SetInputInt64(13, []int64{b64, r64}, in.decSrc),
	}
	if full {
		errs = append(errs,
			pass.SetInput(4, []int64{b64, int64(E), 2, 1, int64(W)}, make([]float32, B*E*2*W)),
			pass.SetInput(5, []int64{b64, 1, int64(W)}, make([]float32, B*W)),
			pass.SetInput(7, []int64{b64, int64(Dd), 2, 1, int64(W)}, make([]float32, B*Dd*2*W)))
	} else {
		errs = append(errs, pass.SetValue(4, stacked.Output(3)), pass.SetValue(5, stacked.Output(4)), pass.SetValue(7, stacked.Output(5)))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := pass.Run(); err != nil {
		return err
	}
	z := make([]float32, B*R*W)
	if err := pass.Output(0).Read(z); err != nil {
		return err
	}
	for b, u := range units {
		copy(u.z, z[b*R*W:b*R*W+len(u.decR)*W])
	}

	kind := kvUpdate
	if full {
		kind = kvFresh
	}
	g, done, err := t.kv.get(kind, B)
	if err != nil {
		return err
	}
	defer done()
	written, err := g.Bind(slices.Repeat([]bool{true}, len(kvRanks)*B)...)
	if err != nil {
		return err
	}
	defer written.Close()
	encAt, outAt, decAt := in.writePlaces(units, E, Dd)
	if full {
		errs = []error{
			written.SetInputInt64(0, []int64{5}, []int64{b64, int64(E), 2, int64(S + 1), int64(W)}),
			written.SetInputInt64(3, []int64{3}, []int64{b64, int64(S + 1), int64(W)}),
			written.SetInputInt64(6, []int64{5}, []int64{b64, int64(Dd), 2, int64(S + 1), int64(W)}),
		}
	} else {
		errs = []error{written.SetValue(0, stacked.Output(0)), written.SetValue(3, stacked.Output(1)), written.SetValue(6, stacked.Output(2))}
	}
	errs = append(errs,
		written.SetInputInt64(1, []int64{b64, int64(E), 2, q64, 4}, encAt), written.SetValue(2, pass.Output(1)),
		written.SetInputInt64(4, []int64{b64, q64, 2}, outAt), written.SetValue(5, pass.Output(2)),
		written.SetInputInt64(7, []int64{b64, int64(Dd), 2, r64, 4}, decAt), written.SetValue(8, pass.Output(3)))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := written.Run(); err != nil {
		return err
	}
	for b, u := range units {
		c := u.cache
		if c == nil {
			continue
		}
		var next deviceKV
		for j, dst := range []**onnxrt.Value{&next.encKV, &next.encOut, &next.decKV} {
			if *dst, err = written.Take(j*B + b); err != nil {
				next.release()
				return err
			}
		}
		c.dev.release()
		c.dev = &next
		c.record(u, full)
	}
	return nil
}

// record notes in the half's bookkeeping what a call wrote: the encoder positions it holds and
// the age of each decoder position's K/V.
func (c *tokenCache) record(u cacheUnit, full bool) {
	if full {
		clear(c.encHas)
	}
	for _, p := range u.encQ {
		c.encHas[p] = true
	}
	for _, p := range u.decR {
		c.fresh[p] = u.step
	}
}
