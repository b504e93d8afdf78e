package onnxrt

import (
	"fmt"
	"sync/atomic"
)

// takenCount is how many taken values are alive in the process (TakenValues).
var takenCount atomic.Int64

// TakenValues is how many values taken with Take are not yet released, over the process: a
// test's check that a path hands back what it keeps on the device.
func TakenValues() int64 { return takenCount.Load() }

// Take hands output i of the last Run to the caller, who releases it with Release. Unlike
// Output's values it outlives the binding's next Run and its Close, so that a tensor can stay
// on the device across calls (mar's K/V cache). It lives no longer than the graph whose
// binding made it: that graph's Close releases it if its owner has not.
func (b *Binding) Take(i int) (*Value, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i < 0 || i >= len(b.outs) || b.outs[i] == nil {
		return nil, fmt.Errorf("%s: output %d to take: none (not run, or taken already)", b.g.source, i)
	}
	v := b.outs[i]
	b.outs[i] = nil
	v.owner = b.g
	b.g.mu.Lock()
	b.g.taken[v] = struct{}{}
	b.g.mu.Unlock()
	takenCount.Add(1)
	return v, nil
}

// TakenValues is how many values taken from the graph's bindings are not yet released.
func (g *Graph) TakenValues() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.taken)
}

// Release frees a taken value. Safe to call twice, on nil, and after its graph's Close.
func (v *Value) Release() {
	if v == nil || v.owner == nil {
		return
	}
	g := v.owner
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.taken[v]; !ok {
		return
	}
	delete(g.taken, v)
	v.free()
}

// releaseTaken frees every value still taken from the graph's bindings (g.mu held).
func (g *Graph) releaseTaken() {
	for v := range g.taken {
		v.free()
	}
	clear(g.taken)
}

func (v *Value) free() {
	releaseValue(v.ptr)
	v.released = true
	takenCount.Add(-1)
}
