package mar

import (
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

// The picked rows are, bit for bit, the whole pass's rows at those positions, guided and not;
// the pass's output stays where ONNX Runtime made it (one handoff to the pick graph, one read
// of the picked rows, no other read), and MARSPEC_PICK_ROWS=off gives the same rows through a
// whole pass with no binding at all.
func TestPickedMatchesFull(t *testing.T) {
	m := openPack(t, "../models/target")
	if _, ok := Unmemoized(m.Transformer).(RowPicker); !ok {
		t.Fatalf("the embedded target's transformer is %T, which does not pick rows", Unmemoized(m.Transformer))
	}
	L, W := m.Manifest.SeqLen(), m.Manifest.Width
	ctx, at := pickCase(t, m, 3, 7)
	zAll, zuAll := make([]float32, ctx.Rows*L*W), make([]float32, ctx.Rows*L*W)
	if err := ctx.Condition(m.Transformer, zAll, zuAll); err != nil {
		t.Fatal(err)
	}
	want, wantU := make([]float32, len(at)*W), make([]float32, len(at)*W)
	pickFrom(zAll, L, W, at, want)
	pickFrom(zuAll, L, W, at, wantU)
	for _, pick := range []string{"on", "off"} {
		t.Setenv("MARSPEC_PICK_ROWS", pick)
		for _, guided := range []bool{false, true} {
			z := make([]float32, len(at)*W)
			var zu []float32
			if guided {
				zu = make([]float32, len(at)*W)
			}
			before := onnxrt.ReadBindingStats()
			if err := ctx.ConditionPicked(m.Transformer, at, z, zu); err != nil {
				t.Fatal(err)
			}
			d := onnxrt.ReadBindingStats()
			if !slices.Equal(z, want) || (guided && !slices.Equal(zu, wantU)) {
				t.Fatalf("picking %s, guided=%v: the picked z differs from the whole pass's rows", pick, guided)
			}
			runs, handoffs, reads := d.Runs-before.Runs, d.Handoffs-before.Handoffs, d.Reads-before.Reads
			if pick == "on" && (runs != 2 || handoffs != 1 || reads != 1) {
				t.Errorf("picking on, guided=%v: %d bound runs, %d handoffs, %d reads; want 2 runs (pass, pick), 1 handoff, 1 read", guided, runs, handoffs, reads)
			}
			if pick == "off" && runs != 0 {
				t.Errorf("picking off, guided=%v: %d bound runs, want none", guided, runs)
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

// A call that holds an opening row goes through the opening memo's whole pass (remembering
// it) and picks the same rows as a call without the memo; a later call of the same opening
// is served from memory.
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
		got := make([]float32, len(at)*W)
		if err := ctx.ConditionPicked(m.Transformer, at, got, nil); err != nil {
			t.Fatal(err)
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

// Whole images (Generate, and the Stepper that serves the scheduler) are identical with
// picking on and off, guided and unguided, and Generate's AR steps after the opening really
// picked.
func TestImagesSameWithPicking(t *testing.T) {
	m := openPack(t, "../models/target")
	for _, opt := range []Options{
		{Seed: 5, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, NumIter: 4, Steps: 10},
		{Seed: 6, CFG: 1, Temperature: 0.95, NumIter: 4, Steps: 10},
	} {
		classes := []int{1, 3, 3}
		t.Setenv("MARSPEC_PICK_ROWS", "off")
		want, err := m.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("MARSPEC_PICK_ROWS", "on")
		before := onnxrt.ReadBindingStats()
		got, err := m.Generate(classes, opt)
		if err != nil {
			t.Fatal(err)
		}
		if h := onnxrt.ReadBindingStats().Handoffs - before.Handoffs; h != int64(opt.NumIter-1) {
			t.Errorf("cfg %g: %d picked passes, want %d (every AR step but the opening)", opt.CFG, h, opt.NumIter-1)
		}
		for i := range want {
			if !slices.Equal(want[i].Tokens, got[i].Tokens) || !slices.Equal(want[i].Pixels, got[i].Pixels) {
				t.Errorf("cfg %g image %d: tokens or pixels differ with picking on", opt.CFG, i)
			}
		}
		// the Stepper, with the images joining a step apart (its second step mixes an
		// opening row with picked ones)
		stepped := stepJoining(t, m, classes, opt)
		for i := range want {
			if !slices.Equal(want[i].Tokens, stepped[i]) {
				t.Errorf("cfg %g image %d: the Stepper's tokens with picking on differ from Generate's with it off", opt.CFG, i)
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
// target, picking 4 positions per row, with picking on and off (MARSPEC_PICK_ROWS).
func BenchmarkConditionPicked(b *testing.B) {
	needRuntime(b)
	p, err := LoadPackDir("../models/target")
	if err != nil {
		b.Fatal(err)
	}
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
