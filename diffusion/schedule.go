// Package diffusion is the Gaussian diffusion of MAR's diffusion head (improved DDPM: cosine
// schedule, epsilon prediction, learned-range variance), computed in float64 so the Go sampler
// reproduces the PyTorch one. Every step takes caller-supplied noise and exposes its Gaussian.
package diffusion

import (
	"fmt"
	"math"
)

// Schedule holds the respaced noise schedule and the coefficients of its reverse steps.
// Index k runs over the respaced steps 0..Steps()-1; k = Steps()-1 is the noisiest.
type Schedule struct {
	timesteps []int // training timestep of each respaced step
	betas     []float64
	acp       []float64 // alphas cumulative product

	sqrtRecipAcp, sqrtRecipM1Acp []float64
	postLogVarClipped, logBetas  []float64
	coef1, coef2                 []float64
}

// NewSchedule builds a schedule of trainingSteps respaced to samplingSteps, as MAR's
// space_timesteps does with a single section.
func NewSchedule(kind string, trainingSteps, samplingSteps int) (*Schedule, error) {
	if trainingSteps < 2 {
		return nil, fmt.Errorf("training steps %d: need at least 2", trainingSteps)
	}
	if samplingSteps < 1 || samplingSteps > trainingSteps {
		return nil, fmt.Errorf("sampling steps %d out of range (allowed: 1 to %d)", samplingSteps, trainingSteps)
	}
	base, err := trainingBetas(kind, trainingSteps)
	if err != nil {
		return nil, err
	}
	keep := respace(trainingSteps, samplingSteps)
	betas := make([]float64, 0, len(keep))
	acp, last, next := 1.0, 1.0, 0
	for i, b := range base {
		acp *= 1 - b
		if next < len(keep) && keep[next] == i {
			betas = append(betas, 1-acp/last)
			last = acp
			next++
		}
	}
	return fromBetas(betas, keep), nil
}

func trainingBetas(kind string, T int) ([]float64, error) {
	betas := make([]float64, T)
	switch kind {
	case "cosine":
		alphaBar := func(t float64) float64 {
			c := math.Cos((t + 0.008) / 1.008 * math.Pi / 2)
			return c * c
		}
		for i := range betas {
			betas[i] = math.Min(1-alphaBar(float64(i+1)/float64(T))/alphaBar(float64(i)/float64(T)), 0.999)
		}
	case "linear":
		// numpy.linspace(lo, hi, T) evaluates start + i*step and pins the last element to hi;
		// the same order of operations keeps the betas bit-identical.
		scale := 1000 / float64(T)
		lo, hi := scale*1e-4, scale*0.02
		step := (hi - lo) / float64(T-1)
		for i := range betas {
			betas[i] = float64(float64(i)*step) + lo // rounded product: no fused multiply-add
		}
		betas[T-1] = hi
	default:
		return nil, fmt.Errorf("noise schedule %q unknown (allowed: cosine, linear)", kind)
	}
	return betas, nil
}

// respace picks n of T timesteps evenly, rounding like Python's round (half to even).
func respace(T, n int) []int {
	if n == T {
		keep := make([]int, T)
		for i := range keep {
			keep[i] = i
		}
		return keep
	}
	if n == 1 {
		return []int{0}
	}
	stride := float64(T-1) / float64(n-1)
	keep := make([]int, 0, n)
	cur := 0.0
	for i := 0; i < n; i++ {
		t := int(math.RoundToEven(cur))
		if len(keep) == 0 || keep[len(keep)-1] != t {
			keep = append(keep, t)
		}
		cur += stride
	}
	return keep
}

func fromBetas(betas []float64, timesteps []int) *Schedule {
	n := len(betas)
	s := &Schedule{timesteps: timesteps, betas: betas, acp: make([]float64, n),
		sqrtRecipAcp: make([]float64, n), sqrtRecipM1Acp: make([]float64, n),
		postLogVarClipped: make([]float64, n), logBetas: make([]float64, n),
		coef1: make([]float64, n), coef2: make([]float64, n)}
	postVar := make([]float64, n)
	prev := 1.0
	for k, b := range betas {
		acp := prev * (1 - b)
		s.acp[k] = acp
		s.sqrtRecipAcp[k] = math.Sqrt(1 / acp)
		s.sqrtRecipM1Acp[k] = math.Sqrt(1/acp - 1)
		postVar[k] = b * (1 - prev) / (1 - acp)
		s.coef1[k] = b * math.Sqrt(prev) / (1 - acp)
		s.coef2[k] = (1 - prev) * math.Sqrt(1-b) / (1 - acp)
		s.logBetas[k] = math.Log(b)
		prev = acp
	}
	// The posterior variance is 0 at k = 0; its log is clipped to the value at k = 1. A
	// one-step schedule has no k = 1 (improved DDPM fails there); log beta is the finite choice.
	for k := range postVar {
		s.postLogVarClipped[k] = math.Log(postVar[k])
	}
	if n > 1 {
		s.postLogVarClipped[0] = s.postLogVarClipped[1]
	} else {
		s.postLogVarClipped[0] = s.logBetas[0]
	}
	return s
}

// Steps is the number of respaced sampling steps.
func (s *Schedule) Steps() int { return len(s.betas) }

// TrainingTimestep is the training-schedule timestep of respaced step k: what the network's t
// input receives.
func (s *Schedule) TrainingTimestep(k int) int { return s.timesteps[k] }

// AlphaBar is the cumulative signal fraction at respaced step k.
func (s *Schedule) AlphaBar(k int) float64 { return s.acp[k] }

// Beta is the respaced beta at step k.
func (s *Schedule) Beta(k int) float64 { return s.betas[k] }

// LogBeta is log beta_k: the log-variance the head selects with v = +1.
func (s *Schedule) LogBeta(k int) float64 { return s.logBetas[k] }

// PosteriorLogVariance is the clipped log-variance of q(x_{k-1} | x_k, x_0): the log-variance
// the head selects with v = -1.
func (s *Schedule) PosteriorLogVariance(k int) float64 { return s.postLogVarClipped[k] }
