// Package analytic provides MAR-style models in closed form, for testing samplers: the
// transformer's conditioning is a Gaussian's mean and scale that depend on the known tokens
// (so the AR structure matters), and the head predicts the exact epsilon of Gaussian data.
package analytic

import (
	"math"

	"marspec/mar"
)

// Params define one analytic model. Token j at position pos given class c and known tokens K
// is (approximately, through the diffusion sampler) N(Base[pos] + ClassShift*c +
// Coupling*mean(K), Scale^2) in every dimension.
type Params struct {
	Name       string
	SeqLen     int
	TokenDim   int
	Base       []float64 // [SeqLen]
	ClassShift float64
	Coupling   float64
	Scale      float64
	VarInterp  float64 // the head's variance interpolation v in [-1, 1]
	Steps      int     // diffusion sampling steps in the manifest
	Classes    int
}

// New builds a model pack stand-in: manifest, transformer, head and tokenizer.
func New(p Params) *mar.Model {
	m := &mar.Manifest{Format: "marspec-pack/1", Name: p.Name, TokenDim: p.TokenDim, Width: p.TokenDim + 1}
	m.Image.Height, m.Image.Width, m.Image.Channels = 1, p.SeqLen, p.TokenDim
	m.Tokenizer.Kind, m.Tokenizer.Patch = "space_to_depth", 1
	m.Grid.Height, m.Grid.Width = 1, p.SeqLen
	for c := 0; c < p.Classes; c++ {
		m.Classes = append(m.Classes, string(rune('a'+c)))
	}
	m.Diffusion.Schedule, m.Diffusion.TrainingSteps, m.Diffusion.SamplingSteps = "cosine", 1000, p.Steps
	m.Diffusion.Variance = "learned_range"
	tok := mar.SpaceToDepth{Patch: 1, GridH: 1, GridW: p.SeqLen, Channels: p.TokenDim}
	return &mar.Model{Manifest: m, Transformer: &Transformer{p}, Head: &Head{dim: p.TokenDim, v: float32(p.VarInterp), alphaBar: trainingAlphaBar()}, Tokenizer: tok}
}

// Transformer computes z = (mean per dimension..., log scale) for every position.
type Transformer struct{ p Params }

func (t *Transformer) SeqLen() int   { return t.p.SeqLen }
func (t *Transformer) TokenDim() int { return t.p.TokenDim }
func (t *Transformer) Width() int    { return t.p.TokenDim + 1 }

func (t *Transformer) Forward(tokens, mask []float32, classIDs []int64, drop []float32, batch int, z []float32) error {
	L, D, W := t.p.SeqLen, t.p.TokenDim, t.p.TokenDim+1
	ctx := make([]float64, D)
	for b := 0; b < batch; b++ {
		known := 0
		for i := range ctx {
			ctx[i] = 0
		}
		for pos := 0; pos < L; pos++ {
			if mask[b*L+pos] < 0.5 {
				known++
				for i := 0; i < D; i++ {
					ctx[i] += float64(tokens[(b*L+pos)*D+i])
				}
			}
		}
		shift := t.p.ClassShift * float64(classIDs[b])
		if drop[b] > 0.5 {
			shift = 0
		}
		for pos := 0; pos < L; pos++ {
			out := z[(b*L+pos)*W : (b*L+pos+1)*W]
			for i := 0; i < D; i++ {
				mean := t.p.Base[pos] + shift
				if known > 0 {
					mean += t.p.Coupling * ctx[i] / float64(known)
				}
				out[i] = float32(mean)
			}
			out[D] = float32(math.Log(t.p.Scale))
		}
	}
	return nil
}

// Head returns the exact epsilon for Gaussian data N(mean, scale^2) and a fixed v.
type Head struct {
	dim      int
	v        float32
	alphaBar []float64
}

func (h *Head) TokenDim() int { return h.dim }
func (h *Head) Width() int    { return h.dim + 1 }

func (h *Head) Predict(xt, t, z []float32, n int, out []float32) error {
	D, W := h.dim, h.dim+1
	for r := 0; r < n; r++ {
		ab := h.alphaBar[int(t[r])]
		s := math.Exp(float64(z[r*W+D]))
		for i := 0; i < D; i++ {
			mean := float64(z[r*W+i])
			x := float64(xt[r*D+i])
			out[r*2*D+i] = float32(math.Sqrt(1-ab) * (x - math.Sqrt(ab)*mean) / (ab*s*s + 1 - ab))
			out[r*2*D+D+i] = h.v
		}
	}
	return nil
}

func trainingAlphaBar() []float64 {
	f := func(t float64) float64 { c := math.Cos((t + 0.008) / 1.008 * math.Pi / 2); return c * c }
	ab := make([]float64, 1000)
	prod := 1.0
	for i := range ab {
		prod *= 1 - math.Min(1-f(float64(i+1)/1000)/f(float64(i)/1000), 0.999)
		ab[i] = prod
	}
	return ab
}
