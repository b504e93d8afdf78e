package mar

import (
	"slices"
	"testing"

	"marspec/onnxrt"
)

// openCacheTargets opens the embedded target twice: its cache in Go memory, and on the device
// (the CPU's memory here, through the calls a GPU gets).
func openCacheTargets(t *testing.T) (host, dev *Model) {
	t.Helper()
	t.Setenv("MARSPEC_CACHE_ON_DEVICE", "off")
	host = openPack(t, "../models/target")
	t.Setenv("MARSPEC_CACHE_ON_DEVICE", "on")
	dev = openPack(t, "../models/target")
	if host.Cached == nil || host.Cached.kv != nil || dev.Cached == nil || dev.Cached.kv == nil {
		t.Fatal("want the embedded target's cache in Go memory, then on the device")
	}
	return host, dev
}

// The cache kept on the device gives the z of the cache in Go memory, bit for bit, through
// the reference's sequences of full and lazy steps (guided, the CFG difference reused or not,
// recomputed positions); each call reads back z alone, the K/V never reach Go memory, and a
// released cache leaves nothing on the device.
func TestDeviceCacheMatchesHostCache(t *testing.T) {
	host, dev := openCacheTargets(t)
	fx := readCacheFixture(t)
	L, W := fx.SeqLen, fx.Width
	kept := onnxrt.TakenValues()
	lazySteps := 0
	for _, c := range fx.Cases {
		s := CacheSettings{On: true, FullSteps: c.Settings.FullSteps, RefreshEvery: c.Settings.RefreshEvery,
			Recompute: c.Settings.Recompute, ReuseCFG: c.Settings.CFGReuse}
		mask := make([]float32, L)
		for i := range mask {
			mask[i] = 1
		}
		caches := [2]*ImageCache{{}, {}}
		z := [2][]float32{make([]float32, L*W), make([]float32, L*W)}
		var zu [2][]float32
		if c.Guided {
			zu = [2][]float32{make([]float32, L*W), make([]float32, L*W)}
		}
		known, cached := 0, false // cached: a step ran the cached graph
		for k, size := range c.Sizes {
			predict := fx.Order[known : known+size]
			cached = cached || s.Kind(k, len(c.Sizes)) != StepPlain
			for i, m := range []*Model{host, dev} {
				row := CacheRow{Cache: caches[i], Tokens: fx.Tokens, Mask: mask, Class: fx.ClassID, Guided: c.Guided,
					Settings: s, Step: k, NumSteps: len(c.Sizes), Predict: predict}
				before := onnxrt.ReadBindingStats()
				if err := m.ConditionCached([]CacheRow{row}, z[i], zu[i]); err != nil {
					t.Fatal(err)
				}
				kind := s.Kind(k, len(c.Sizes))
				if reads := onnxrt.ReadBindingStats().Reads - before.Reads; i == 1 && kind != StepPlain && reads != 1 {
					t.Fatalf("%v step %d (%v): %d reads back from the device, want 1 (z)", s, k, kind, reads)
				}
				if i == 1 && kind == StepLazy {
					lazySteps++
				}
			}
			if !slices.Equal(z[0], z[1]) || !slices.Equal(zu[0], zu[1]) {
				t.Fatalf("%v, guided %v, step %d (%v): z differs between the cache on the device and in Go memory",
					s, c.Guided, k, s.Kind(k, len(c.Sizes)))
			}
			for _, p := range predict {
				mask[p] = 0
			}
			known += size
		}
		for _, h := range caches[1].halves {
			if h != nil && (h.encKV != nil || h.encOut != nil || h.decKV != nil) {
				t.Fatal("a cache on the device also holds K/V in Go memory")
			}
		}
		if cached && (caches[1].halves[0] == nil || caches[1].halves[0].dev == nil) {
			t.Fatalf("%v: the device cache holds no K/V after the sequence", s)
		}
		caches[1].Release()
		if n := onnxrt.TakenValues() - kept; n != 0 {
			t.Fatalf("%v: %d tensors left on the device after Release, want 0", s, n)
		}
	}
	if lazySteps == 0 {
		t.Fatal("no lazy step ran: the device cache was not read")
	}
}

// Whole images with the cache on the device are those with the cache in Go memory: Generate
// (guided, the CFG difference reused and not) and the Stepper with images joining a step
// apart, so that a call pads some image halves' queries; finished, removed and cleared images
// leave nothing on the device.
func TestDeviceCacheImages(t *testing.T) {
	host, dev := openCacheTargets(t)
	kept := onnxrt.TakenValues()
	classes := []int{1, 7, 9}
	for _, reuse := range []bool{true, false} {
		opt := Options{Seed: 5, CFG: 3, CFGSchedule: "linear", NumIter: 8, Steps: 10,
			Cache: CacheSettings{On: true, FullSteps: 2, RefreshEvery: 3, Recompute: 3, ReuseCFG: reuse}}
		want, err := host.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dev.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !slices.Equal(want[i].Tokens, got[i].Tokens) {
				t.Fatalf("reuse %v, image %d: Generate's tokens differ with the cache on the device", reuse, i)
			}
		}
		if n := onnxrt.TakenValues() - kept; n != 0 {
			t.Fatalf("reuse %v: %d tensors left on the device after Generate, want 0", reuse, n)
		}
		stepped := [2]map[int][]float32{stepJoining(t, host, classes, opt), stepJoining(t, dev, classes, opt)}
		for i := range classes {
			if !slices.Equal(stepped[0][i], stepped[1][i]) {
				t.Fatalf("reuse %v, image %d: the Stepper's tokens differ with the cache on the device", reuse, i)
			}
		}
		if n := onnxrt.TakenValues() - kept; n != 0 {
			t.Fatalf("reuse %v: %d tensors left on the device after the Stepper's images finished, want 0", reuse, n)
		}
	}
	s := NewStepper(dev)
	opt := Options{Seed: 2, CFG: 3, NumIter: 8, Steps: 10, Cache: CacheSettings{On: true, FullSteps: 1, RefreshEvery: 4, ReuseCFG: true}}
	for i, c := range classes {
		if err := s.Add(StepJob{Request: "gone", Index: i, Class: c, Options: opt}); err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < 3; k++ {
		if _, err := s.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if onnxrt.TakenValues() == kept {
		t.Fatal("no tensor on the device after three cached steps")
	}
	s.Remove("gone")
	if n := onnxrt.TakenValues() - kept; n != 0 {
		t.Fatalf("%d tensors left on the device after the request was removed, want 0", n)
	}
	for i, c := range classes { // and a Stepper cleared (a failed group's engine) lets go too
		if err := s.Add(StepJob{Request: "dropped", Index: i, Class: c, Options: opt}); err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < 3; k++ {
		if _, err := s.Step(); err != nil {
			t.Fatal(err)
		}
	}
	s.Clear()
	if n := onnxrt.TakenValues() - kept; n != 0 || s.Active() != 0 {
		t.Fatalf("%d tensors left on the device and %d images after Clear, want none", n, s.Active())
	}
}

// A Stepper whose calls carry a new count of image halves at every step (images joining one by
// one, both halves lazy) keeps few of the small graphs open, since each keeps a pool of device
// memory: the idle ones beyond kvKeepIdle close, never one a cache lives in (the tokens stay
// those of the cache in Go memory).
func TestDeviceCacheGraphsStayFew(t *testing.T) {
	host, dev := openCacheTargets(t)
	classes := []int{0, 1, 2, 3, 4, 5, 6}
	opt := Options{Seed: 3, CFG: 3, NumIter: 10, Steps: 5,
		Cache: CacheSettings{On: true, FullSteps: 1, RefreshEvery: 5, Recompute: 2, ReuseCFG: false}}
	want := stepJoining(t, host, classes, opt)
	most := 0
	got := stepJoining(t, dev, classes, opt, func(step int) {
		open, _ := dev.Cached.kv.counts()
		for kind, n := range open {
			most = max(most, n)
			if n > kvKeepIdle+3 {
				t.Fatalf("step %d: %d graphs of kind %d open, want at most %d idle ones and those holding caches", step, n, kind, kvKeepIdle)
			}
		}
	})
	if _, opened := dev.Cached.kv.counts(); opened[kvUpdate] <= most {
		t.Fatalf("%d updating graphs opened in all, at most %d of a kind open at once: nothing was closed", opened[kvUpdate], most)
	}
	for i := range classes {
		if !slices.Equal(want[i], got[i]) {
			t.Fatalf("image %d: tokens differ with the cache on the device", i)
		}
	}
	_, opened := dev.Cached.kv.counts()
	t.Logf("at most %d graphs of a kind open at once; opened %v (stack, update, fresh)", most, opened)
}

// A lazy call of the embedded target with the cache in Go memory and on the device (the CPU's
// memory here: what the device's path costs where there is no PCIe to save). 16 guided images,
// the CFG difference reused, after a full pass knowing 8 tokens each.
func BenchmarkCacheLazyCall(b *testing.B) {
	needRuntime(b)
	p, err := LoadPackDir("../models/target")
	if err != nil {
		b.Fatal(err)
	}
	const images = 16
	for _, where := range []string{"off", "on"} {
		b.Setenv("MARSPEC_CACHE_ON_DEVICE", where)
		m, err := p.Open(onnxrt.SessionOptions{})
		if err != nil {
			b.Fatal(err)
		}
		L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
		settings := CacheSettings{On: true, FullSteps: 1, RefreshEvery: 1000, Recompute: L / 16, ReuseCFG: true}
		rows := make([]CacheRow, images)
		for i := range rows {
			tokens, mask := make([]float32, L*D), make([]float32, L)
			for j := range tokens {
				tokens[j] = float32(j%7) * 0.1
			}
			for j := range mask {
				mask[j] = boolF32(j >= 8)
			}
			rows[i] = CacheRow{Cache: &ImageCache{}, Tokens: tokens, Mask: mask, Class: i % 10, Guided: true,
				Settings: settings, Step: 1, NumSteps: 10, Predict: []int{8, 9, 10, 11}}
		}
		z, zu := make([]float32, images*L*W), make([]float32, images*L*W)
		if err := m.ConditionCached(rows, z, zu); err != nil { // step 1: a full pass keeping the K/V
			b.Fatal(err)
		}
		for i := range rows {
			rows[i].Step = 2
		}
		if k := settings.Kind(2, 10); k != StepLazy {
			b.Fatalf("step 2 is %v, want lazy", k)
		}
		b.Run("on_device="+where, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := m.ConditionCached(rows, z, zu); err != nil {
					b.Fatal(err)
				}
			}
		})
		for i := range rows {
			rows[i].Cache.Release()
		}
		closeModel(m)
	}
}
