package mar

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"marspec/onnxrt"
)

// pickCase is a batch whose rows know random tokens (none an opening row), and picks over it:
// a few positions per row, unsorted, one picked twice.
func pickCase(t *testing.T, m *Model, rows int, seed int64) (*ContextBatch, [][2]int) {
	t.Helper()
	L, D := m.Manifest.SeqLen(), m.Manifest.TokenDim
	rng := rand.New(rand.NewSource(seed))
	ctx := NewContextBatch(rows, L, D)
	x := make([]float64, D)
	var at [][2]int
	for r := 0; r < rows; r++ {
		ctx.ClassIDs[r] = int64(rng.Intn(len(m.Manifest.Classes)))
		perm := rng.Perm(L)
		for _, pos := range perm[:1+rng.Intn(L-3)] {
			for j := range x {
				x[j] = rng.Float64()*2 - 1
			}
			ctx.Set(r, pos, x)
		}
		for _, pos := range perm[L-3:] {
			at = append(at, [2]int{r, pos})
		}
	}
	at = append(at, at[1])
	return ctx, at
}

// openPackAt opens the pack in dir at precision; without the picked graph when picked is false
// (a pack made before picked_transformer.py, whose passes pick through the pick graph).
func openPackAt(t *testing.T, dir, precision string, picked bool) *Model {
	t.Helper()
	needRuntime(t)
	p, err := LoadPackDirAt(dir, precision)
	if err != nil {
		t.Fatal(err)
	}
	if p.Picked == nil && p.PickedFile == "" {
		t.Fatalf("%s has no picked graph at %s", dir, precision)
	}
	if !picked {
		p.Picked, p.PickedFile = nil, ""
	}
	m, err := p.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Head.(*ONNXHead).Close(); m.Transformer.(*OpeningMemo).Close() })
	return m
}

// pickedTolerance bounds |picked z - whole z| through the picked graph (transformer_picked.onnx),
// whose last block runs on fewer rows, so its products may be summed in another order: on the
// development machine (AMD EPYC, AVX-512) they are not, and the rows are equal bit for bit at
// fp32 and int8 (per-row activation scales: a row's quantisation does not see its neighbours),
// once calls pick at least 2 positions per image (one query row takes ONNX Runtime's
// matrix-vector kernels, 2.4e-7 apart).
const pickedTolerance = 1e-5

// The picked rows are the whole pass's rows at those positions, guided and not, with rows
// picking different counts and one picking nothing: through the picked graph at fp32 and int8
// (within pickedTolerance, no bound run), and through the pick graph in a pack without one
// (bit for bit; the pass's output stays where ONNX Runtime made it: one handoff to the pick
// graph, one read of the picked rows, no other read). MARSPEC_PICK_ROWS=off gives the same
// rows through a whole pass with no binding and no picked graph.
func TestPickedMatchesFull(t *testing.T) {
	for _, c := range []struct {
		precision string
		picked    bool
	}{{FP32, true}, {Int8, true}, {FP32, false}} {
		m := openPackAt(t, "../models/target", c.precision, c.picked)
		if _, ok := Unmemoized(m.Transformer).(RowPicker); !ok {
			t.Fatalf("the embedded target's transformer is %T, which does not pick rows", Unmemoized(m.Transformer))
		}
		L, W := m.Manifest.SeqLen(), m.Manifest.Width
		ctx, at := pickCase(t, m, 3, 7)
		at = slices.DeleteFunc(at, func(a [2]int) bool { return a[0] == 1 })
		zAll, zuAll := make([]float32, ctx.Rows*L*W), make([]float32, ctx.Rows*L*W)
		if err := ctx.Condition(m.Transformer, zAll, zuAll); err != nil {
			t.Fatal(err)
		}
		want, wantU := make([]float32, len(at)*W), make([]float32, len(at)*W)
		pickFrom(zAll, L, W, at, want)
		pickFrom(zuAll, L, W, at, wantU)
		for _, pick := range []string{"off", "on"} {
			t.Setenv("MARSPEC_PICK_ROWS", pick)
			for _, guided := range []bool{false, true} {
				z := make([]float32, len(at)*W)
				var zu []float32
				if guided {
					zu = make([]float32, len(at)*W)
				}
				before, pickedBefore := onnxrt.ReadBindingStats(), PickedPasses()
				if err := ctx.ConditionPicked(m.Transformer, at, z, zu); err != nil {
					t.Fatal(err)
				}
				d, passes := onnxrt.ReadBindingStats(), PickedPasses()-pickedBefore
				name := fmt.Sprintf("%s, picked graph %v, picking %s, guided=%v", c.precision, c.picked, pick, guided)
				tol := 0.0
				if c.picked && pick == "on" {
					tol = pickedTolerance
				}
				if e := maxAbsDiff(z, want); e > tol || (guided && maxAbsDiff(zu, wantU) > tol) {
					t.Fatalf("%s: the picked z differs from the whole pass's rows by %g (allowed %g)", name, max(e, maxAbsDiff(zu, wantU)), tol)
				}
				runs, handoffs, reads := d.Runs-before.Runs, d.Handoffs-before.Handoffs, d.Reads-before.Reads
				switch {
				case pick == "off" && (runs != 0 || passes != 0):
					t.Errorf("%s: %d bound runs, %d picked-graph passes; want neither", name, runs, passes)
				case pick == "on" && c.picked && (runs != 0 || passes != 1):
					t.Errorf("%s: %d bound runs, %d picked-graph passes; want the picked graph's one pass alone", name, runs, passes)
				case pick == "on" && !c.picked && (runs != 2 || handoffs != 1 || reads != 1):
					t.Errorf("%s: %d bound runs, %d handoffs, %d reads; want 2 runs (pass, pick), 1 handoff, 1 read", name, runs, handoffs, reads)
				}
			}
		}
	}
}

// Picks out of range are refused with the batch's size named, before any pass.
func TestPickedRefusesOutOfRange(t *testing.T) {
	m := openPack(t, "../models/target")
	tr := Unmemoized(m.Transformer).(RowPicker)
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	ctx := NewContextBatch(2, L, D)
	tokens, mask, class, drop, rows := ctx.Inputs(false)
	for _, at := range [][2]int{{2, 0}, {0, L}, {-1, 3}} {
		err := tr.ForwardPicked(tokens, mask, class, drop, rows, [][2]int{at}, make([]float32, W))
		if err == nil {
			t.Errorf("pick %v of 2 rows of %d positions accepted", at, L)
		}
	}
}

// A call that holds an opening row takes that row through the opening memo's whole pass
// (remembering it) and the others through the picked graph, and picks the same rows as a call
// without the memo; a later call of the same opening is served from memory.
func TestPickedThroughOpeningMemo(t *testing.T) {
	m := openPack(t, "../models/target")
	memo, ok := m.Transformer.(*OpeningMemo)
	if !ok {
		t.Fatalf("the model's transformer is %T, want *OpeningMemo", m.Transformer)
	}
	L, W := m.Manifest.SeqLen(), m.Manifest.Width
	ctx, at := pickCase(t, m, 3, 9)
	for i := range ctx.Mask[L : 2*L] { // row 1 knows nothing: an opening
		ctx.Mask[L+i] = 1
	}
	ctx.ClassIDs[1] = 4
	whole := make([]float32, ctx.Rows*L*W)
	if err := ctx.Condition(memo.Transformer, whole, nil); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(at)*W)
	pickFrom(whole, L, W, at, want)
	for call := 0; call < 2; call++ {
		hits0, computed0 := memo.Stats()
		passes0 := PickedPasses()
		got := make([]float32, len(at)*W)
		if err := ctx.ConditionPicked(m.Transformer, at, got, nil); err != nil {
			t.Fatal(err)
		}
		if passes := PickedPasses() - passes0; passes != 1 {
			t.Errorf("call %d: %d passes of the picked graph, want 1 (the rows that know tokens)", call, passes)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("call %d: rows picked through the memo differ from the plain pass's", call)
		}
		hits, computed := memo.Stats()
		if call == 0 && computed-computed0 != 1 {
			t.Errorf("first call computed %d openings, want 1", computed-computed0)
		}
		if call == 1 && (hits-hits0 != 1 || computed != computed0) {
			t.Errorf("second call: %d hits, %d computed; want the opening served from memory", hits-hits0, computed-computed0)
		}
	}
}

// Whole images (Generate, and the Stepper that serves the scheduler) are the same with picking
// on and off, guided and unguided: through the picked graph (tokens within pickedTolerance,
// pixels within a grey level; on the development machine identical) and through the pick graph
// of a pack without one (identical); and Generate's AR steps after the opening really picked.
func TestImagesSameWithPicking(t *testing.T) {
	for _, picked := range []bool{true, false} {
		m := openPackAt(t, "../models/target", FP32, picked)
		for _, opt := range []Options{
			{Seed: 5, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, NumIter: 4, Steps: 10},
			{Seed: 6, CFG: 1, Temperature: 0.95, NumIter: 4, Steps: 10},
		} {
			name := fmt.Sprintf("picked graph %v, cfg %g", picked, opt.CFG)
			classes := []int{1, 3, 3}
			t.Setenv("MARSPEC_PICK_ROWS", "off")
			want, err := m.Generate(classes, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("MARSPEC_PICK_ROWS", "on")
			before, pickedBefore := onnxrt.ReadBindingStats(), PickedPasses()
			got, err := m.Generate(classes, opt)
			if err != nil {
				t.Fatal(err)
			}
			h, passes := onnxrt.ReadBindingStats().Handoffs-before.Handoffs, PickedPasses()-pickedBefore
			switch {
			case picked && (h != 0 || passes != int64(opt.NumIter-1)):
				t.Errorf("%s: %d passes through the pick graph, %d through the picked graph; want 0 and %d (every AR step but the opening)", name, h, passes, opt.NumIter-1)
			case !picked && h != int64(opt.NumIter-1):
				t.Errorf("%s: %d picked passes, want %d (every AR step but the opening)", name, h, opt.NumIter-1)
			}
			tol, grey := 0.0, 0
			if picked {
				tol, grey = pickedTolerance, 1
			}
			for i := range want {
				if d, g := maxAbsDiff(want[i].Tokens, got[i].Tokens), maxAbsDiffU8(want[i].Pixels, got[i].Pixels); d > tol || g > grey {
					t.Errorf("%s image %d: tokens differ by %g (allowed %g), pixels by %d grey levels (allowed %d) with picking on", name, i, d, tol, g, grey)
				}
			}
			// the Stepper, with the images joining a step apart (its second step mixes an
			// opening row with picked ones)
			passes0, steps := PickedPasses(), 0
			stepped := stepJoining(t, m, classes, opt, func(int) { steps++ })
			// every step but the first (openings only) runs the picked graph, openings joining or not
			if passes := PickedPasses() - passes0; picked && passes != int64(steps-1) {
				t.Errorf("%s: the Stepper ran the picked graph in %d of its %d steps, want all but the first", name, passes, steps)
			}
			for i := range want {
				if d := maxAbsDiff(want[i].Tokens, stepped[i]); d > tol {
					t.Errorf("%s image %d: the Stepper's tokens with picking on differ from Generate's with it off by %g (allowed %g)", name, i, d, tol)
				}
			}
		}
	}
}

// stepJoining makes the images of classes with a Stepper, image i joining at step i, and
// returns their tokens by index; each of after runs after each step.
func stepJoining(t *testing.T, m *Model, classes []int, opt Options, after ...func(step int)) map[int][]float32 {
	t.Helper()
	s := NewStepper(m)
	stepped := map[int][]float32{}
	for step := 0; len(stepped) < len(classes); step++ {
		if step < len(classes) {
			if err := s.Add(StepJob{Request: "r", Index: step, Class: classes[step], Options: opt}); err != nil {
				t.Fatal(err)
			}
		}
		done, err := s.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range done {
			stepped[d.Image.Index] = d.Image.Tokens
		}
		for _, f := range after {
			f(step)
		}
	}
	return stepped
}

// The cached graph's full passes (a MAR-B pack on the CPU) pick, bit for bit, the rows of
// their whole output.
func TestFullPassesPick(t *testing.T) {
	lowerFullPassesThreshold(t)
	_, m := loadParity(t)
	fp, ok := Unmemoized(m.Transformer).(FullPasses)
	if !ok {
		t.Fatalf("the model's transformer is %T, want FullPasses", Unmemoized(m.Transformer))
	}
	L, W := m.Manifest.SeqLen(), m.Manifest.Width
	ctx, at := pickCase(t, m, 2, 11)
	tokens, mask, class, drop, rows := ctx.Inputs(true)
	whole := make([]float32, rows*L*W)
	if err := fp.Forward(tokens, mask, class, drop, rows, whole); err != nil {
		t.Fatal(err)
	}
	at = append(at, [2]int{3, 0}, [2]int{2, L - 1}) // the "no class" half's rows too
	want, got := make([]float32, len(at)*W), make([]float32, len(at)*W)
	pickFrom(whole, L, W, at, want)
	if err := fp.ForwardPicked(tokens, mask, class, drop, rows, at, got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("the full passes' picked rows differ from their whole output's")
	}
}

// BenchmarkConditionPicked times one AR step's guided pass over 64 rows on the embedded
// target, picking 4 positions per row, with picking on and off (MARSPEC_PICK_ROWS), the rows
// taken by the pick graph (the pack's picked graph left out: BenchmarkPickedGraph times it).
func BenchmarkConditionPicked(b *testing.B) {
	needRuntime(b)
	p, err := LoadPackDir("../models/target")
	if err != nil {
		b.Fatal(err)
	}
	p.Picked, p.PickedFile = nil, ""
	m, err := p.Open(onnxrt.SessionOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer closeModel(m)
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	const rows, perRow = 64, 4
	ctx := NewContextBatch(rows, L, D)
	x := make([]float64, D)
	var at [][2]int
	for r := 0; r < rows; r++ {
		ctx.Set(r, r%L, x)
		for k := 1; k <= perRow; k++ {
			at = append(at, [2]int{r, (r + k) % L})
		}
	}
	z, zu := make([]float32, len(at)*W), make([]float32, len(at)*W)
	for _, pick := range []string{"off", "on"} {
		b.Run("pick="+pick, func(b *testing.B) {
			b.Setenv("MARSPEC_PICK_ROWS", pick)
			for i := 0; i < b.N; i++ {
				if err := ctx.ConditionPicked(m.Transformer, at, z, zu); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPickedGraph times one AR step's pass on the embedded target as the default
// request's second step makes it (32 images, unguided, 16 tokens known, 16 predicted), at fp32
// and int8: the whole pass (MARSPEC_PICK_ROWS=off), the pass with its picked rows taken by the
// pick graph (a pack without the picked graph), and the picked graph.
func BenchmarkPickedGraph(b *testing.B) {
	needRuntime(b)
	for _, precision := range []string{FP32, Int8} {
		p, err := LoadPackDirAt("../models/target", precision)
		if err != nil {
			b.Fatal(err)
		}
		picked, pickedFile := p.Picked, p.PickedFile
		for _, way := range []string{"whole", "pick-graph", "picked-graph"} {
			p.Picked, p.PickedFile = nil, ""
			if way == "picked-graph" {
				p.Picked, p.PickedFile = picked, pickedFile
			}
			m, err := p.Open(onnxrt.SessionOptions{})
			if err != nil {
				b.Fatal(err)
			}
			L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
			const rows, known = 32, 16
			ctx := NewContextBatch(rows, L, D)
			x := make([]float64, D)
			var at [][2]int
			for r := 0; r < rows; r++ {
				for k := 0; k < known; k++ {
					x[k%D] = float64(r+k) / 50
					ctx.Set(r, (r+3*k)%L, x)
				}
				for k := 0; k < L && len(at) < (r+1)*known; k++ {
					if ctx.Mask[r*L+k] == 1 {
						at = append(at, [2]int{r, k})
					}
				}
			}
			z := make([]float32, len(at)*W)
			b.Run(precision+"/"+way, func(b *testing.B) {
				b.Setenv("MARSPEC_PICK_ROWS", map[bool]string{true: "off", false: "on"}[way == "whole"])
				for i := 0; i < b.N; i++ {
					if err := ctx.ConditionPicked(m.Transformer, at, z, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
			closeModel(m)
		}
	}
}
