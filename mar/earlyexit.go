package mar

import (
	"encoding/json"
	"fmt"

	"marspec/onnxrt"
)

// EarlyExit is a target transformer split at an exit depth, with a small trained exit after the
// first blocks (scripts/train/early_exit.py; seed 003's early-exit self-draft). The base weights are
// the target's own: Draft runs only the first blocks plus the exit, and Rest finishes the
// same contexts from Draft's hidden states, so a context drafted from and then verified runs
// every target block once.
type EarlyExit interface {
	// Draft fills, for contexts given as to Transformer.Forward: zExit [batch, L, W], the exit's
	// conditioning for every position; logVar [batch, L], its predicted log mean squared error
	// against the full transformer's z (the draft's own confidence: low is sure); hidden
	// [batch, HiddenLen, W], the state after the first blocks.
	Draft(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, zExit, logVar, hidden []float32) error
	// Rest fills z [batch, L, W] from Draft's hidden states and the contexts' masks: equal to
	// Transformer.Forward over the same contexts.
	Rest(hidden, mask []float32, batch int, z []float32) error
	// HiddenLen is the hidden state's sequence length (the tokens plus the class buffer).
	HiddenLen() int
}

// EarlyExitSpec is the manifest's optional "early_exit" entry (docs/model-pack.md).
type EarlyExitSpec struct {
	Depth      int             `json:"depth"`       // transformer blocks before the exit
	Blocks     int             `json:"blocks"`      // transformer blocks in all (encoder + decoder)
	ExitBlocks int             `json:"exit_blocks"` // blocks inside the trained exit
	Draft      string          `json:"draft"`       // graph: first blocks + exit
	Rest       string          `json:"rest"`        // graph: the remaining blocks
	HiddenLen  int             `json:"hidden_len"`
	Training   json.RawMessage `json:"training,omitempty"`
}

func (s *EarlyExitSpec) validate(m *Manifest) error {
	switch {
	case s.Depth < 1 || s.Depth >= s.Blocks:
		return fmt.Errorf("early_exit depth %d out of range (allowed: 1 to blocks-1 = %d)", s.Depth, s.Blocks-1)
	case s.ExitBlocks < 0:
		return fmt.Errorf("early_exit exit_blocks %d must not be negative", s.ExitBlocks)
	case !isPackFileName(s.Draft) || !isPackFileName(s.Rest):
		return fmt.Errorf("early_exit draft %q / rest %q: want file names in the pack folder ending in .onnx", s.Draft, s.Rest)
	case s.HiddenLen != m.SeqLen()+m.BufferSize:
		return fmt.Errorf("early_exit hidden_len %d != tokens + buffer_size = %d", s.HiddenLen, m.SeqLen()+m.BufferSize)
	}
	return nil
}

// ONNXEarlyExit runs a pack's exit_draft and exit_rest graphs.
type ONNXEarlyExit struct {
	draft, rest *onnxrt.Graph
	hiddenLen   int
}

// NewONNXEarlyExit opens both graphs and checks their inputs and outputs against the pack.
func NewONNXEarlyExit(draft, rest []byte, m *Manifest, opt onnxrt.SessionOptions, source string) (*ONNXEarlyExit, error) {
	L, D, W, H := int64(m.SeqLen()), int64(m.TokenDim), int64(m.Width), int64(m.EarlyExit.HiddenLen)
	mask := onnxrt.IOSpec{Name: "mask", Shape: []int64{-1, L}}
	hidden := onnxrt.IOSpec{Name: "hidden", Shape: []int64{-1, H, W}}
	dg, err := onnxrt.NewGraph(draft, source+"/"+m.EarlyExit.Draft, opt,
		[]onnxrt.IOSpec{{Name: "tokens", Shape: []int64{-1, L, D}}, mask,
			{Name: "class_ids", Int64: true, Shape: []int64{-1}}, {Name: "drop_class", Shape: []int64{-1}}},
		[]onnxrt.IOSpec{{Name: "z_exit", Shape: []int64{-1, L, W}}, {Name: "exit_logvar", Shape: []int64{-1, L}}, hidden})
	if err != nil {
		return nil, err
	}
	rg, err := onnxrt.NewGraph(rest, source+"/"+m.EarlyExit.Rest, opt,
		[]onnxrt.IOSpec{hidden, mask}, []onnxrt.IOSpec{{Name: "z", Shape: []int64{-1, L, W}}})
	if err != nil {
		dg.Close()
		return nil, err
	}
	return &ONNXEarlyExit{draft: dg, rest: rg, hiddenLen: int(H)}, nil
}

func (x *ONNXEarlyExit) Draft(tokens, mask []float32, classIDs []int64, dropClass []float32, batch int, zExit, logVar, hidden []float32) error {
	return x.draft.Run(batch, [][]float32{zExit, logVar, hidden}, tokens, mask, classIDs, dropClass)
}

func (x *ONNXEarlyExit) Rest(hidden, mask []float32, batch int, z []float32) error {
	return x.rest.RunInto(batch, z, hidden, mask)
}

func (x *ONNXEarlyExit) HiddenLen() int { return x.hiddenLen }

// Close releases both sessions.
func (x *ONNXEarlyExit) Close() error {
	err := x.draft.Close()
	if rerr := x.rest.Close(); err == nil {
		err = rerr
	}
	return err
}

// ExitPass is an early-exit draft pass over a ContextBatch. Guided, every array holds the class
// rows, then the same rows with "no class".
type ExitPass struct {
	Rows, HiddenLen, SeqLen, Width int
	Guided                         bool
	ZExit, LogVar, Hidden          []float32
}

// RunExitDraft runs x's Draft over the batch (one call, doubled under guidance).
func RunExitDraft(x EarlyExit, c *ContextBatch, width int, guided bool) (*ExitPass, error) {
	tokens, mask, class, drop, rows := c.Inputs(guided)
	p := &ExitPass{Rows: c.Rows, HiddenLen: x.HiddenLen(), SeqLen: c.SeqLen, Width: width, Guided: guided,
		ZExit: make([]float32, rows*c.SeqLen*width), LogVar: make([]float32, rows*c.SeqLen),
		Hidden: make([]float32, rows*x.HiddenLen()*width)}
	return p, x.Draft(tokens, mask, class, drop, rows, p.ZExit, p.LogVar, p.Hidden)
}

// Z is the exit's conditioning for row r at pos, and the "no class" one (nil unguided).
func (p *ExitPass) Z(r, pos int) (z, zu []float32) {
	at := func(row int) []float32 { return p.ZExit[(row*p.SeqLen+pos)*p.Width : (row*p.SeqLen+pos+1)*p.Width] }
	if p.Guided {
		return at(r), at(p.Rows + r)
	}
	return at(r), nil
}

// Confidence is the exit's predicted log mean squared z error for row r at pos (the class
// half's under guidance: the draft's token follows it most).
func (p *ExitPass) Confidence(r, pos int) float64 { return float64(p.LogVar[r*p.SeqLen+pos]) }

// HiddenRow copies row r's hidden state (both halves under guidance) for a later FinishExit.
func (p *ExitPass) HiddenRow(r int) []float32 {
	n := p.HiddenLen * p.Width
	out := append([]float32(nil), p.Hidden[r*n:(r+1)*n]...)
	if p.Guided {
		out = append(out, p.Hidden[(p.Rows+r)*n:(p.Rows+r+1)*n]...)
	}
	return out
}

// FinishExit runs x's Rest over saved contexts in one call: hidden[i] is context i's
// HiddenRow, mask[i] its mask [L]. It returns z and, guided, zu ([rows, L, W] each), equal to
// the full transformer's over the same contexts.
func FinishExit(x EarlyExit, hidden, mask [][]float32, L, W int, guided bool) (z, zu []float32, err error) {
	rows, n := len(hidden), x.HiddenLen()*W
	halves := condHalves(guided)
	h := make([]float32, halves*rows*n)
	m := make([]float32, halves*rows*L)
	for half := 0; half < halves; half++ {
		for i := range hidden {
			copy(h[(half*rows+i)*n:], hidden[i][half*n:(half+1)*n])
			copy(m[(half*rows+i)*L:], mask[i])
		}
	}
	all := make([]float32, halves*rows*L*W)
	if err := x.Rest(h, m, halves*rows, all); err != nil {
		return nil, nil, err
	}
	if guided {
		return all[:rows*L*W], all[rows*L*W:], nil
	}
	return all, nil, nil
}
