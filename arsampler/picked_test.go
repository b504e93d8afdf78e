package arsampler

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"marspec/mar"
	"marspec/onnxrt"
)

// embeddedPair opens the embedded target and draft packs on the CPU provider.
func embeddedPair(t *testing.T) (target, draft *mar.Model) {
	t.Helper()
	lib := filepath.Join("..", onnxrt.DefaultLib)
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("%s is absent: run `make setup` to run this test", lib)
	}
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	open := func(dir string) *mar.Model {
		p, err := mar.LoadPackDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := p.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	return open("../models/target"), open("../models/draft")
}

// Speculative images on the embedded pair are identical with the ONNX passes picking rows and
// with them handing back every row, under prefix and group verification (the batched rounds,
// whose draft and target passes pick; the lazy schedule and self-drafting keep whole passes),
// and the passes really picked. Both runs index the picked rows the same way: that indexing is
// held to the whole-pass paths by the analytic tests (TestLazyScheduleEqualsBatched and
// others fail when a pick is misplaced).
func TestSpeculativeImagesSameWithPicking(t *testing.T) {
	target, draft := embeddedPair(t)
	base := DefaultConfig()
	base.Sampling = mar.Options{Seed: 3, CFG: 2.5, CFGSchedule: "linear", Temperature: 1, Steps: 8}
	base.Gamma = 3
	for _, verify := range []Verify{Prefix, Group} {
		cfg := base
		cfg.Verify = verify
		classes := []int{0, 7}
		t.Setenv("MARSPEC_PICK_ROWS", "off")
		want, _, err := Generate(target, draft, cfg, classes, 0, 0)
		if err != nil {
			t.Fatalf("%v: %v", verify, err)
		}
		t.Setenv("MARSPEC_PICK_ROWS", "on")
		before, pickedBefore := onnxrt.ReadBindingStats(), mar.PickedPasses()
		got, sum, err := Generate(target, draft, cfg, classes, 0, 0)
		if err != nil {
			t.Fatalf("%v: %v", verify, err)
		}
		// every pass but the opening one (nothing known: the opening memo's whole pass): the
		// target's through its picked transformer, the draft's (which has none) through the
		// pick graph
		h, p := onnxrt.ReadBindingStats().Handoffs-before.Handoffs, mar.PickedPasses()-pickedBefore
		if h != int64(sum.DraftForwards) || p != int64(sum.TargetForwards-1) {
			t.Errorf("%v: %d draft passes picked through the pick graph and %d target passes through the picked transformer, want %d and %d (all but the opening)",
				verify, h, p, sum.DraftForwards, sum.TargetForwards-1)
		}
		for i := range want {
			if !slices.Equal(want[i].Tokens, got[i].Tokens) {
				t.Errorf("%v image %d: tokens differ with picking on", verify, i)
			}
		}
	}
}
