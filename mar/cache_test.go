package mar

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"marspec/onnxrt"
)

func TestCacheKindSchedule(t *testing.T) {
	c := CacheSettings{On: true, FullSteps: 2, RefreshEvery: 3}
	var got []string
	for k := 0; k < 9; k++ {
		got = append(got, c.Kind(k, 9).String())
	}
	// full passes at 0, 1, 2, 5, 8; a full pass keeps its cache only when a lazy step follows
	want := []string{"plain", "plain", "full", "lazy", "lazy", "full", "lazy", "lazy", "plain"}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("kinds %v, want %v", got, want)
		}
	}
	every := CacheSettings{On: true, FullSteps: 1, RefreshEvery: 1}
	for k := 0; k < 5; k++ {
		if every.Kind(k, 5) != StepPlain {
			t.Fatalf("refresh every step: step %d is %v, want plain (today's pass)", k, every.Kind(k, 5))
		}
	}
	if err := (CacheSettings{On: true, FullSteps: 0, RefreshEvery: 1}).Validate(49); err == nil {
		t.Fatal("full_steps 0 accepted: the first step has no cache to read")
	}
}

func TestStalestPositions(t *testing.T) {
	fresh := []int{0, 0, 3, 1, 1, 2, 0} // buffer 2: token positions 2..6
	got := stalestPositions(fresh, map[int]bool{6: true}, 2, 2)
	if len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Fatalf("stalest %v, want [3 4] (oldest first, ties by position, 6 excluded)", got)
	}
}

func loadCachedTarget(t *testing.T) *Model {
	t.Helper()
	_, m := loadParity(t)
	if m.Cached == nil {
		t.Fatal("embedded target has no cached transformer")
	}
	return m
}

// A full pass through the cached graph is the transformer's pass (same weights, same
// contexts: rows knowing different numbers of tokens, a dropped class).
func TestCachedGraphFullPassMatchesTransformer(t *testing.T) {
	fx, m := loadParity(t)
	tr := fx.Transformer
	L, D, W := fx.SeqLen, fx.TokenDim, fx.Width
	want := make([]float32, tr.Batch*L*W)
	if err := openPlainTransformer(t, m).Forward(tr.Tokens, tr.Mask, tr.ClassIDs, tr.DropClass, tr.Batch, want); err != nil {
		t.Fatal(err)
	}
	ct := m.Cached
	var units []cacheUnit
	for b := 0; b < tr.Batch; b++ {
		mask := tr.Mask[b*L : (b+1)*L]
		var encQ, all []int
		for p := 0; p < ct.S; p++ {
			all = append(all, p)
			if p < ct.buf || mask[p-ct.buf] == 0 {
				encQ = append(encQ, p)
			}
		}
		units = append(units, cacheUnit{cache: ct.newTokenCache(), tokens: tr.Tokens[b*L*D : (b+1)*L*D], mask: mask,
			class: tr.ClassIDs[b], drop: tr.DropClass[b], encQ: encQ, decR: all, z: make([]float32, ct.S*W)})
	}
	if err := ct.run(units, true); err != nil {
		t.Fatal(err)
	}
	for b, u := range units {
		d := maxAbsDiff32(u.z[ct.buf*W:], want[b*L*W:(b+1)*L*W])
		t.Logf("row %d: cached full pass vs transformer.onnx max abs diff %.3g", b, d)
		if d > parityTol {
			t.Fatalf("row %d: cached full pass differs from transformer.onnx by %g > %g", b, d, parityTol)
		}
	}
}

// openPlainTransformer opens the embedded target's transformer.onnx, which Pack.Open leaves
// closed (the cached graph serves its passes).
func openPlainTransformer(t *testing.T, m *Model) *ONNXTransformer {
	t.Helper()
	data, err := os.ReadFile("../models/target/transformer.onnx")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewONNXTransformer(data, m.Manifest, onnxrt.SessionOptions{}, "target/transformer.onnx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// A pack with a cached graph over FullPassesFromCacheBytes (a MAR-B pack; the embedded one
// with the threshold lowered) opens only that graph (its weights once, not twice with
// transformer.onnx's): it serves the full passes, and the images are transformer.onnx's within
// a grey level (its passes equal up to summation order), with and without the cache.
func TestCachedGraphServesFullPasses(t *testing.T) {
	lowerFullPassesThreshold(t)
	_, m := loadParity(t)
	fp, ok := Unmemoized(m.Transformer).(FullPasses)
	if !ok || fp.CachedTransformer != m.Cached {
		t.Fatalf("the model's transformer is %T, want FullPasses over its cached graph (transformer.onnx opened beside it)", Unmemoized(m.Transformer))
	}
	classes := []int{1, 7, 9}
	for _, cache := range []CacheSettings{{}, {On: true, FullSteps: 2, RefreshEvery: 4, Recompute: 3, ReuseCFG: true}} {
		opt := Options{Seed: 5, CFG: 3, NumIter: 16, Steps: 10, Cache: cache}
		got, err := m.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		plain := *m
		plain.Transformer = openPlainTransformer(t, m)
		want, err := plain.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if d := maxAbsDiffU8(got[i].Pixels, want[i].Pixels); d > 1 {
				t.Fatalf("cache %v, image %d: %d grey levels from transformer.onnx's", cache, i, d)
			}
		}
	}
}

// Full passes at different numbers of known tokens keep one set of the cached graph's bound
// tensors, not one per size: at MAR-B a set is about 95 MB with guidance.
func TestFullPassesKeepOneTensorSet(t *testing.T) {
	lowerFullPassesThreshold(t)
	fx, m := loadParity(t)
	tr := fx.Transformer
	L, W := fx.SeqLen, fx.Width
	z := make([]float32, L*W)
	mask := make([]float32, L)
	for known := 0; known < 4; known++ {
		for i := range mask {
			mask[i] = boolF32(i >= known*L/4)
		}
		if err := m.Transformer.Forward(tr.Tokens[:L*fx.TokenDim], mask, tr.ClassIDs[:1], tr.DropClass[:1], 1, z); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Cached.g.CachedSizes(); n != 1 {
		t.Fatalf("the cached graph keeps %d sets of bound tensors after full passes at 4 sizes, want 1", n)
	}
}

// cacheFixture is written by scripts/packs/cached_transformer.py --fixture from the embedded target's
// weights: the PyTorch reference's z at each step's predicted positions, for one image whose
// tokens are revealed in a fixed order (fixed values: no head), under several cache settings.
type cacheFixture struct {
	SeqLen   int       `json:"seq_len"`
	TokenDim int       `json:"token_dim"`
	Width    int       `json:"width"`
	ClassID  int       `json:"class_id"`
	Tokens   []float32 `json:"tokens"`
	Order    []int     `json:"order"`
	Cases    []struct {
		NumIter  int `json:"num_iter"`
		Settings struct {
			FullSteps    int  `json:"full_steps"`
			RefreshEvery int  `json:"refresh_every"`
			Recompute    int  `json:"recompute"`
			CFGReuse     bool `json:"cfg_reuse"`
		}
		Guided  bool
		Sizes   []int
		Z       [][]float32
		ZUncond [][]float32 `json:"z_uncond"`
	}
}

func readCacheFixture(t *testing.T) cacheFixture {
	t.Helper()
	data, err := os.ReadFile("testdata/cache_target.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx cacheFixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	return fx
}

// The Go cache (bookkeeping in mar/cachestep.go, the graph under ONNX Runtime) reproduces the
// PyTorch reference's cached sequence: full steps exactly the transformer, lazy steps the
// same approximation (the reference keeps its cache its own way, one image at a time).
func TestCachedSequenceMatchesPyTorch(t *testing.T) {
	fx := readCacheFixture(t)
	m := loadCachedTarget(t)
	L, W := fx.SeqLen, fx.Width
	const tol = parityTol // measured: under 3e-6 through 16 steps
	for _, c := range fx.Cases {
		s := CacheSettings{On: true, FullSteps: c.Settings.FullSteps, RefreshEvery: c.Settings.RefreshEvery,
			Recompute: c.Settings.Recompute, ReuseCFG: c.Settings.CFGReuse}
		mask := make([]float32, L)
		for i := range mask {
			mask[i] = 1
		}
		cache := &ImageCache{}
		z := make([]float32, L*W)
		var zu []float32
		if c.Guided {
			zu = make([]float32, L*W)
		}
		known, worst := 0, 0.0
		for k, size := range c.Sizes {
			predict := fx.Order[known : known+size]
			row := CacheRow{Cache: cache, Tokens: fx.Tokens, Mask: mask, Class: fx.ClassID, Guided: c.Guided, Settings: s,
				Step: k, NumSteps: len(c.Sizes), Predict: predict}
			if err := m.ConditionCached([]CacheRow{row}, z, zu); err != nil {
				t.Fatal(err)
			}
			for j, p := range predict {
				d := maxAbsDiff32(z[p*W:(p+1)*W], c.Z[k][j*W:(j+1)*W])
				if c.Guided {
					d = max(d, maxAbsDiff32(zu[p*W:(p+1)*W], c.ZUncond[k][j*W:(j+1)*W]))
				}
				if d > tol {
					t.Fatalf("%+v step %d (%v) position %d: z differs from the reference by %g > %g", s, k, s.Kind(k, len(c.Sizes)), p, d, tol)
				}
				worst = max(worst, d)
			}
			for _, p := range predict {
				mask[p] = 0
			}
			known += size
		}
		t.Logf("%v, guided %v, %d steps: max abs diff %.3g", s, c.Guided, len(c.Sizes), worst)
	}
}

// Refreshing every step is today's sampler, image bytes equal; lazy steps change the images
// (the cache is on) but the Stepper makes the same ones as Model.Generate.
func TestCacheImages(t *testing.T) {
	m := loadCachedTarget(t)
	classes := []int{1, 7, 9}
	base := Options{Seed: 5, CFG: 3, NumIter: 16, Steps: 10}
	plain, err := m.Generate(classes, base)
	if err != nil {
		t.Fatal(err)
	}
	every := base
	every.Cache = CacheSettings{On: true, FullSteps: 1, RefreshEvery: 1, ReuseCFG: true}
	same, err := m.Generate(classes, every)
	if err != nil {
		t.Fatal(err)
	}
	for i := range plain {
		if !bytes.Equal(plain[i].Pixels, same[i].Pixels) {
			t.Fatalf("image %d: refresh every step differs from no cache", i)
		}
	}
	lazy := base
	lazy.Cache = CacheSettings{On: true, FullSteps: 2, RefreshEvery: 4, Recompute: 3, ReuseCFG: true}
	got, err := m.Generate(classes, lazy)
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i := range got {
		if !bytes.Equal(plain[i].Pixels, got[i].Pixels) {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("lazy steps changed no image: the cache did not run")
	}
	st := NewStepper(m)
	for i, c := range classes {
		if err := st.Add(StepJob{Request: "r", Index: i, Class: c, Options: lazy}); err != nil {
			t.Fatal(err)
		}
	}
	done := map[int][]uint8{}
	for st.Active() > 0 {
		res, err := st.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			done[r.Image.Index] = r.Image.Pixels
		}
	}
	for i := range got {
		if d := maxAbsDiffU8(done[i], got[i].Pixels); d > 1 {
			t.Fatalf("image %d: Stepper with the cache differs from Model.Generate by %d grey levels", i, d)
		}
	}
}

func maxAbsDiffU8(a, b []uint8) int {
	d := 0
	for i := range a {
		d = max(d, abs(int(a[i])-int(b[i])))
	}
	return d
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// On a GPU the cached graph's full pass would copy every block's K/V to host memory, so a pack
// that serves from its cached graph on the CPU runs full passes on transformer.onnx there
// (fullPassesFromCache), opened from disk or read from an fs: the plain pass's images, to the
// bit, and the cached graph still opened for the cache.
func TestGPUFullPassesOnTransformer(t *testing.T) {
	lowerFullPassesThreshold(t)
	was := fullPassesFromCache
	fullPassesFromCache = func(onnxrt.Device) bool { return false } // the rule a CUDA device gets
	t.Cleanup(func() { fullPassesFromCache = was })
	if !was(onnxrt.CPU) || was(onnxrt.Device{CUDA: true}) {
		t.Fatal("full passes from the cached graph: want on the CPU only")
	}
	_, ref := loadParity(t)
	fromFS, err := LoadPackFS(os.DirFS("../models"), "target", "fs/target")
	if err != nil {
		t.Fatal(err)
	}
	fromDisk, err := LoadPackDir("../models/target")
	if err != nil {
		t.Fatal(err)
	}
	plain := *ref
	plain.Transformer = openPlainTransformer(t, ref)
	classes := []int{2, 8}
	opt := Options{Seed: 3, CFG: 3, NumIter: 8, Steps: 10}
	want, err := plain.Generate(classes, opt)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*Pack{"fs": fromFS, "disk": fromDisk} {
		if !p.ServesFromCache() || p.Transformer != nil || p.TransformerFile != "" {
			t.Fatalf("%s: the pack read transformer.onnx before a device asked for it", name)
		}
		m, err := p.Open(onnxrt.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := Unmemoized(m.Transformer).(withCached); !ok || m.Cached == nil {
			t.Fatalf("%s: the transformer is %T with cached graph %v, want transformer.onnx beside the cached graph", name, Unmemoized(m.Transformer), m.Cached != nil)
		}
		got, err := m.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !bytes.Equal(got[i].Pixels, want[i].Pixels) {
				t.Fatalf("%s: image %d differs from transformer.onnx's", name, i)
			}
		}
	}
}
