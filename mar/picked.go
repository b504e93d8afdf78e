package mar

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"marspec/onnxrt"
)

// RowPicker is a Transformer that can hand back z at chosen positions only. An AR step's head
// reads the z of the few positions it predicts (4 of 256 per image at MAR's 64 steps), while
// a pass makes z for every position: [batch, L, W] floats, 100 MB at MAR-B's guided batch 64.
// On a GPU the rest need not cross to host memory nor be copied in Go.
type RowPicker interface {
	// ForwardPicked fills z [len(at), W] with what Forward puts at (row, position) at[j].
	ForwardPicked(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, at [][2]int, z []float32) error
}

// pickWanted decides whether transformer.onnx's passes hand back only the picked rows (a
// second graph, onnxrt.PickModel, takes them from the pass's output where it lies):
// everywhere by default, since the images are the same bit for bit (TestPickedMatchesFull) and
// the CPU path is the GPU's code. MARSPEC_PICK_ROWS=off makes passes fill the whole output
// again, for a runtime where the binding fails.
func pickWanted() bool { return os.Getenv("MARSPEC_PICK_ROWS") != "off" }

// rowPick is transformer.onnx's picking: the pick graph, opened on first use on the
// transformer's device.
type rowPick struct {
	opt  onnxrt.SessionOptions
	once sync.Once
	g    *onnxrt.Graph
	err  error
}

func (p *rowPick) graph(width int, source string) (*onnxrt.Graph, error) {
	p.once.Do(func() {
		opt := p.opt
		opt.CUDAGraph = false  // the pass's output is bound as its input: no fixed addresses
		opt.FixedDims = nil    // its axes are its own
		opt.IntraOpThreads = 1 // a copy: no thread pool of its own beside the transformer's
		ins, outs := onnxrt.PickSpecs(width)
		p.g, p.err = onnxrt.NewGraph(onnxrt.PickModel(width), source+" (picking rows)", opt, ins, outs)
	})
	return p.g, p.err
}

func (p *rowPick) close() error {
	var err error
	p.once.Do(func() { p.err = errors.New("closed") }) // a later use opens nothing
	if p.g != nil {
		err = p.g.Close()
	}
	return err
}

// ForwardPicked runs the pack's picked transformer when it has one (pickedgraph.go); else it runs
// the pass with its output kept on the device and hands the pick graph that value: only len(at)
// rows of W floats come back.
func (t *ONNXTransformer) ForwardPicked(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, at [][2]int, z []float32) error {
	L, W := t.seqLen, t.width
	if err := checkPicks(at, batch, L, W, z); err != nil {
		return fmt.Errorf("%s: %v", t.Source(), err)
	}
	if t.picked != nil {
		if err := t.picked.forward(tokens, mask, classIDs, dropClass, batch, at, z); err != nil {
			return fmt.Errorf("transformer pass at the picked rows only (MARSPEC_PICK_ROWS=off runs the whole pass instead): %w", err)
		}
		return nil
	}
	if err := t.forwardPicked(tokens, mask, classIDs, dropClass, batch, at, z); err != nil {
		return fmt.Errorf("transformer pass handing back only the picked rows (MARSPEC_PICK_ROWS=off hands back every row instead): %w", err)
	}
	return nil
}

func (t *ONNXTransformer) forwardPicked(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, at [][2]int, z []float32) error {
	L, D, W := t.seqLen, t.dim, t.width
	flat := make([]int64, 0, 2*len(at))
	for _, a := range at {
		flat = append(flat, int64(a[0]), int64(a[1]))
	}
	pick, err := t.pick.graph(W, t.Source())
	if err != nil {
		return err
	}
	pass, err := t.Bind(true)
	if err != nil {
		return err
	}
	defer pass.Close()
	b := int64(batch)
	for _, in := range []error{
		pass.SetInput(0, []int64{b, int64(L), int64(D)}, tokens),
		pass.SetInput(1, []int64{b, int64(L)}, mask),
		pass.SetInputInt64(2, []int64{b}, classIDs),
		pass.SetInput(3, []int64{b}, dropClass),
	} {
		if in != nil {
			return in
		}
	}
	if err := pass.Run(); err != nil {
		return err
	}
	taken, err := pick.Bind()
	if err != nil {
		return err
	}
	defer taken.Close()
	if err := taken.SetValue(0, pass.Output(0)); err != nil {
		return err
	}
	if err := taken.SetInputInt64(1, []int64{int64(len(at)), 2}, flat); err != nil {
		return err
	}
	if err := taken.Run(); err != nil {
		return err
	}
	return taken.Output(0).Read(z)
}

// ForwardPicked fills z [len(at), W] with the z of t's pass at (row, position) at[j]: through
// t's own picking when it has one (and pickWanted), else from a whole pass.
func ForwardPicked(t Transformer, tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, at [][2]int, z []float32) error {
	if p, ok := t.(RowPicker); ok && pickWanted() {
		return p.ForwardPicked(tokens, mask, classIDs, dropClass, batch, at, z)
	}
	return pickFromPass(t, tokens, mask, classIDs, dropClass, batch, at, z)
}

// pickFromPass runs t's whole pass (Forward) and copies the rows at (row, position) into z.
func pickFromPass(t Transformer, tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, at [][2]int, z []float32) error {
	L, W := t.SeqLen(), t.Width()
	whole := make([]float32, batch*L*W)
	if err := t.Forward(tokens, mask, classIDs, dropClass, batch, whole); err != nil {
		return err
	}
	pickFrom(whole, L, W, at, z)
	return nil
}

// checkPicks says whether at's pairs lie in batch rows of L positions and z holds them.
func checkPicks(at [][2]int, batch, L, W int, z []float32) error {
	if len(z) < len(at)*W {
		return fmt.Errorf("picked z holds %d values, need %d", len(z), len(at)*W)
	}
	for _, a := range at {
		if a[0] < 0 || a[0] >= batch || a[1] < 0 || a[1] >= L {
			return fmt.Errorf("pick (row %d, position %d) outside %d rows of %d positions", a[0], a[1], batch, L)
		}
	}
	return nil
}

// pickFrom copies the rows at (row, position) of whole [rows, L, W] into z [len(at), W].
func pickFrom(whole []float32, L, W int, at [][2]int, z []float32) {
	for j, a := range at {
		copy(z[j*W:(j+1)*W], whole[(a[0]*L+a[1])*W:(a[0]*L+a[1]+1)*W])
	}
}

// ForwardPicked serves the opening rows of a call (those knowing no token) from the memo's
// whole pass (Forward, which remembers them) and the others through the wrapped transformer's
// picking, as two calls when a call holds both: the scheduler's Stepper mixes images that
// just joined with images further on at nearly every step. A row's z does not depend on the
// rows beside it in a call (TestOpeningMemoMatchesTheGraph), so the split changes nothing.
func (o *OpeningMemo) ForwardPicked(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, at [][2]int, z []float32) error {
	L := o.SeqLen()
	opening := make([]bool, batch)
	openings := 0
	for r := range opening {
		if opening[r] = knowsNothing(mask[r*L : (r+1)*L]); opening[r] {
			openings++
		}
	}
	switch openings {
	case 0:
		return ForwardPicked(o.Transformer, tokens, mask, classIDs, dropClass, batch, at, z)
	case batch:
		return pickFromPass(o, tokens, mask, classIDs, dropClass, batch, at, z)
	}
	for _, part := range []bool{true, false} {
		sub := subBatchOf(o, tokens, mask, classIDs, dropClass, batch, at, func(r int) bool { return opening[r] == part })
		if len(sub.at) == 0 {
			continue
		}
		picked := make([]float32, len(sub.at)*o.Width())
		var err error
		if part {
			err = pickFromPass(o, sub.tokens, sub.mask, sub.class, sub.drop, sub.rows, sub.at, picked)
		} else {
			err = ForwardPicked(o.Transformer, sub.tokens, sub.mask, sub.class, sub.drop, sub.rows, sub.at, picked)
		}
		if err != nil {
			return err
		}
		sub.scatter(picked, z, o.Width())
	}
	return nil
}

// subBatch is some rows of a call gathered into a call of their own, with the picks in them
// renumbered; from[j] is where sub.at[j] was in the call's picks.
type subBatch struct {
	tokens, mask, drop []float32
	class              []int64
	rows               int
	at                 [][2]int
	from               []int
}

// subBatchOf gathers the rows r of a call for which keep(r) holds.
func subBatchOf(t Transformer, tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, at [][2]int, keep func(r int) bool) subBatch {
	L, D := t.SeqLen(), t.TokenDim()
	var s subBatch
	index := make([]int, batch)
	for r := 0; r < batch; r++ {
		if !keep(r) {
			continue
		}
		index[r] = s.rows
		s.rows++
		s.tokens = append(s.tokens, tokens[r*L*D:(r+1)*L*D]...)
		s.mask = append(s.mask, mask[r*L:(r+1)*L]...)
		s.class = append(s.class, classIDs[r])
		s.drop = append(s.drop, dropClass[r])
	}
	for j, a := range at {
		if keep(a[0]) {
			s.at = append(s.at, [2]int{index[a[0]], a[1]})
			s.from = append(s.from, j)
		}
	}
	return s
}

// scatter copies the sub-batch's picked z [len(s.at), W] to where its picks were in the call's z.
func (s subBatch) scatter(picked, z []float32, W int) {
	for i, j := range s.from {
		copy(z[j*W:(j+1)*W], picked[i*W:(i+1)*W])
	}
}

// ConditionPicked is Condition for the positions at (row, position) only: z gets [len(at), W]
// and, when zUncond is not nil, zUncond the "no class" rows at the same positions. A
// transformer that picks (RowPicker) hands back those rows alone; any other fills its whole
// output and the rows are taken from it.
func (c *ContextBatch) ConditionPicked(t Transformer, at [][2]int, z, zUncond []float32) error {
	tokens, mask, class, drop, rows := c.Inputs(zUncond != nil)
	if zUncond == nil {
		return ForwardPicked(t, tokens, mask, class, drop, rows, at, z)
	}
	c.at = append(c.at[:0], at...) // the class rows' picks, then the same in the "no class" rows
	for _, a := range at {
		c.at = append(c.at, [2]int{a[0] + c.Rows, a[1]})
	}
	n := len(at) * t.Width()
	c.picked = grow(c.picked, 2*n)
	if err := ForwardPicked(t, tokens, mask, class, drop, rows, c.at, c.picked); err != nil {
		return err
	}
	copy(z[:n], c.picked[:n])
	copy(zUncond[:n], c.picked[n:])
	return nil
}
