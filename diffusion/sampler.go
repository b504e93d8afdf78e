package diffusion

import (
	"fmt"
	"math"
	"strings"
)

// Sampler names a training-free reverse process for the same eps-predicting head. Every
// sampler consumes the caller's TokenNoise (x_T, then one epsilon per step), so an image still
// depends only on (seed, image, position, options).
type Sampler string

const (
	DDPM       Sampler = "ddpm"         // MAR's ancestral sampler, learned-range variance (default)
	DDIM       Sampler = "ddim"         // DDIM with eta in [0, 1]; eta = 1 matches DDPM's law with the posterior variance
	DPMPP2M    Sampler = "dpmpp-2m"     // DPM-Solver++(2M): deterministic multistep in x0 prediction
	DPMPP2MSDE Sampler = "dpmpp-2m-sde" // DPM-Solver++(2M) SDE (eta 1, midpoint correction)
	// Distilled runs the pack's trained few-step student head (mar.DistilledHead) instead of
	// this head: not a step of this package, so SampleStep refuses it.
	Distilled Sampler = "distilled"
)

// Samplers lists the accepted names, default first.
var Samplers = []Sampler{DDPM, DDIM, DPMPP2M, DPMPP2MSDE, Distilled}

// SamplerNames is the allowed list as error messages print it.
func SamplerNames() string {
	names := make([]string, len(Samplers))
	for i, s := range Samplers {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// ParseSampler accepts a sampler name; "" is the default, ddpm.
func ParseSampler(name string) (Sampler, error) {
	if name == "" {
		return DDPM, nil
	}
	for _, s := range Samplers {
		if string(s) == name {
			return s, nil
		}
	}
	return "", fmt.Errorf("sampler %q unknown (allowed: %s)", name, SamplerNames())
}

// HasEta says whether eta means anything for the sampler: only DDIM interpolates its noise.
func (s Sampler) HasEta() bool { return s == DDIM }

// GaussianSteps says whether every noisy step is a Gaussian in x_{k-1} whose mean and variance
// depend only on the current state x_k: what speculative decoding needs to compute per-step
// densities of both models at the same point and to align them by shared noise.
//   - ddpm: yes (the improved-DDPM posterior with the learned variance).
//   - ddim, eta > 0: yes, variance sigma_k^2 = eta^2 (1-abar_{k-1})/(1-abar_k) (1-abar_k/abar_{k-1}).
//   - ddim, eta = 0: no, each step is a point mass (no density exists).
//   - dpmpp-2m: no, deterministic.
//   - dpmpp-2m-sde: no. Its step is Gaussian, but its mean uses the x0 prediction made at the
//     previous state too, so it is Gaussian given the last two states, not the current one. A
//     verifier would have to carry each model's own previous prediction along the draft's path
//     and the acceptance test here assumes a Markov chain in x_k; until that is built and its
//     law tested, it is refused rather than approximated.
//   - distilled: no. Its re-noising steps are Gaussian given the student's previous x0, but its
//     last step (and its only step at K = 1) is the student's deterministic x0: a point mass.
func (s Sampler) GaussianSteps(eta float64) bool {
	switch s {
	case DDPM:
		return true
	case DDIM:
		return eta > 0
	}
	return false
}

// SpecSamplers names the samplers speculative decoding accepts, as error messages print it.
const SpecSamplers = "ddpm, ddim with eta > 0"

// SamplerState is one token's memory between steps: multistep solvers reuse the previous
// step's x0 prediction. The zero value is a fresh token; Reset reuses the buffers.
type SamplerState struct {
	prevX0    []float64
	prevH     float64
	havePrev  bool
	x0, eps64 []float64
}

// Reset forgets the previous step (a new token starts).
func (st *SamplerState) Reset() { st.havePrev = false }

// SampleStep takes reverse step k (respaced index; the i-th step taken uses noise Eps[i]) from
// xt with the head's eps (and v, used only by ddpm) and writes x_{k-1} into out (which may alias
// xt). For ddpm and ddim with eta > 0 it also fills mean and logVar with the step's Gaussian
// (for traces) and returns true; otherwise it returns false and leaves them untouched.
//
// Temperature multiplies the standard deviation of the injected noise, as MAR does for ddpm:
// for ddim it scales sigma_k (eta = 0 ignores it), for dpmpp-2m-sde it scales the noise term,
// and dpmpp-2m, having no noise, ignores it. Only for ddpm and ddim is the result a
// tempered Gaussian of the same mean.
func (s *Schedule) SampleStep(sampler Sampler, eta float64, k int, xt []float64, eps, v []float32,
	noise []float64, opt StepOptions, st *SamplerState, mean, logVar, out []float64) bool {
	if sampler == DDPM || sampler == "" {
		s.Posterior(k, xt, eps, v, opt, mean, logVar)
		s.Step(k, mean, logVar, noise, out, opt)
		return true
	}
	n := len(xt)
	st.x0 = growFloat(st.x0, n)
	st.eps64 = growFloat(st.eps64, n)
	x0, e := st.x0, st.eps64
	for i, x := range xt {
		x0[i] = s.sqrtRecipAcp[k]*x - s.sqrtRecipM1Acp[k]*float64(eps[i])
		if opt.ClipX0 {
			x0[i] = math.Max(-1, math.Min(1, x0[i]))
		}
		// eps consistent with the (possibly clipped) x0, as improved-diffusion's DDIM does.
		e[i] = (s.sqrtRecipAcp[k]*x - x0[i]) / s.sqrtRecipM1Acp[k]
	}
	temp := opt.NoiseScale()
	ab := s.acp[k]
	abPrev := 1.0
	if k > 0 {
		abPrev = s.acp[k-1]
	}
	switch sampler {
	case DDIM:
		sigma := 0.0
		if k > 0 {
			sigma = eta * math.Sqrt((1-abPrev)/(1-ab)) * math.Sqrt(1-ab/abPrev)
		}
		dirScale := math.Sqrt(math.Max(0, 1-abPrev-sigma*sigma))
		sd := temp * sigma
		for i := range out {
			m := math.Sqrt(abPrev)*x0[i] + dirScale*e[i]
			out[i] = m + sd*noise[i]
			if sd > 0 {
				mean[i], logVar[i] = m, 2*math.Log(sd)
			}
		}
		return sd > 0
	case DPMPP2M, DPMPP2MSDE:
		if k == 0 {
			// The target, abar = 1, has sigma = 0 and lambda = inf: the step returns x0.
			copy(out, x0)
			return false
		}
		lamT := 0.5 * math.Log(ab/(1-ab))
		lamS := 0.5 * math.Log(abPrev/(1-abPrev))
		h := lamS - lamT
		alphaS, sigS, sigT := math.Sqrt(abPrev), math.Sqrt(1-abPrev), math.Sqrt(1-ab)
		var r float64
		if st.havePrev {
			r = st.prevH / h
		}
		st.prevX0 = growFloat(st.prevX0, n)
		if sampler == DPMPP2M {
			c := -math.Expm1(-h) // 1 - e^{-h}
			for i := range out {
				d := x0[i]
				if st.havePrev {
					d = (1+1/(2*r))*x0[i] - 1/(2*r)*st.prevX0[i]
				}
				out[i] = sigS/sigT*xt[i] + alphaS*c*d
			}
		} else {
			c := -math.Expm1(-2 * h) // 1 - e^{-2h}
			decay := sigS / sigT * math.Exp(-h)
			sd := temp * sigS * math.Sqrt(c)
			for i := range out {
				x := decay*xt[i] + alphaS*c*x0[i]
				if st.havePrev {
					x += 0.5 * alphaS * c / r * (x0[i] - st.prevX0[i])
				}
				out[i] = x + sd*noise[i]
			}
		}
		copy(st.prevX0, x0)
		st.prevH, st.havePrev = h, true
		return false
	}
	if sampler == Distilled {
		panic("diffusion: sampler distilled runs the pack's distilled head (mar.Denoiser), not a head step")
	}
	panic(fmt.Sprintf("diffusion: sampler %q unknown (allowed: %s)", sampler, SamplerNames()))
}

func growFloat(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}
