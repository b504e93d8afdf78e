package analytic

import (
	"math"

	"marspec/mar"
)

// ExitParams define an analytic early exit for a target: the exit's conditioning uses Coupling
// instead of the target's and adds Bias[pos] to every mean, and it predicts its own error as
// log(Bias[pos]^2 + Floor), so positions with a large bias are the ones it is unsure of.
type ExitParams struct {
	Coupling float64
	Bias     []float64 // [SeqLen]
	Floor    float64
}

// WithExit gives model m (built by New(p)) an analytic early exit.
func WithExit(m *mar.Model, p Params, x ExitParams) *mar.Model {
	m.Exit = &Exit{p: p, x: x}
	return m
}

// Exit is the analytic EarlyExit. Its hidden state is two rows of width D+1: the sums of the
// known tokens and their count, then the class shift; Rest turns it into the target's z.
type Exit struct {
	p Params
	x ExitParams
}

func (e *Exit) HiddenLen() int { return 2 }

func (e *Exit) Draft(tokens, mask []float32, classIDs []int64, drop []float32, batch int, zExit, logVar, hidden []float32) error {
	L, D, W := e.p.SeqLen, e.p.TokenDim, e.p.TokenDim+1
	for b := 0; b < batch; b++ {
		h := hidden[b*2*W : (b+1)*2*W]
		for i := range h {
			h[i] = 0
		}
		for pos := 0; pos < L; pos++ {
			if mask[b*L+pos] < 0.5 {
				h[D]++
				for i := 0; i < D; i++ {
					h[i] += tokens[(b*L+pos)*D+i]
				}
			}
		}
		if drop[b] < 0.5 {
			h[W] = float32(e.p.ClassShift * float64(classIDs[b]))
		}
		e.conditioning(h, e.x.Coupling, e.x.Bias, zExit[b*L*W:(b+1)*L*W])
		for pos := 0; pos < L; pos++ {
			logVar[b*L+pos] = float32(math.Log(e.x.Bias[pos]*e.x.Bias[pos] + e.x.Floor))
		}
	}
	return nil
}

func (e *Exit) Rest(hidden, mask []float32, batch int, z []float32) error {
	L, W := e.p.SeqLen, e.p.TokenDim+1
	for b := 0; b < batch; b++ {
		e.conditioning(hidden[b*2*W:(b+1)*2*W], e.p.Coupling, nil, z[b*L*W:(b+1)*L*W])
	}
	return nil
}

// conditioning writes z for every position from a hidden state, as Transformer.Forward does,
// with the given coupling and per-position bias (nil: none).
func (e *Exit) conditioning(h []float32, coupling float64, bias []float64, z []float32) {
	L, D, W := e.p.SeqLen, e.p.TokenDim, e.p.TokenDim+1
	known, shift := float64(h[D]), float64(h[W])
	for pos := 0; pos < L; pos++ {
		out := z[pos*W : (pos+1)*W]
		for i := 0; i < D; i++ {
			mean := e.p.Base[pos] + shift
			if known > 0 {
				mean += coupling * float64(h[i]) / known
			}
			if bias != nil {
				mean += bias[pos]
			}
			out[i] = float32(mean)
		}
		out[D] = float32(math.Log(e.p.Scale))
	}
}
