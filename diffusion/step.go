package diffusion

import "math"

// StepOptions are the sampler settings that change the reverse Gaussians.
type StepOptions struct {
	ClipX0         bool    // clip the x0 prediction to [-1, 1] (pixel tokens)
	Temperature    float64 // multiplies the standard deviation; <= 0 means 1, so the zero value is MAR's default
	FinalStepNoise bool    // give the last step (k = 0) its variance; MAR adds no noise there
}

// NoiseScale is the factor on the noise a step injects: the temperature, 1 where unset.
func (opt StepOptions) NoiseScale() float64 {
	if opt.Temperature <= 0 {
		return 1
	}
	return opt.Temperature
}

// Posterior fills the mean and log-variance of the Gaussian the reverse step k samples from,
// given x_t and the head's epsilon and variance interpolation v in [-1, 1]. logVar includes
// the temperature: it is the variance actually sampled with, so densities computed from it
// are those of the sampler.
func (s *Schedule) Posterior(k int, xt []float64, eps, v []float32, opt StepOptions, mean, logVar []float64) {
	tempLog := 0.0
	if opt.Temperature > 0 && opt.Temperature != 1 {
		tempLog = 2 * math.Log(opt.Temperature)
	}
	for i, x := range xt {
		// float64(...) around products forbids fused multiply-adds, which the reference
		// (separate numpy/torch ops) never does: results stay bit-comparable.
		x0 := float64(s.sqrtRecipAcp[k]*x) - float64(s.sqrtRecipM1Acp[k]*float64(eps[i]))
		if opt.ClipX0 {
			x0 = math.Max(-1, math.Min(1, x0))
		}
		mean[i] = float64(s.coef1[k]*x0) + float64(s.coef2[k]*x)
		frac := (float64(v[i]) + 1) / 2
		logVar[i] = float64(frac*s.logBetas[k]) + float64((1-frac)*s.postLogVarClipped[k]) + tempLog
	}
}

// Step draws x_{k-1} = mean + exp(logVar/2)*noise into out. At k = 0 MAR adds no noise and
// returns the mean, unless FinalStepNoise asks for a proper Gaussian last step.
func (s *Schedule) Step(k int, mean, logVar, noise, out []float64, opt StepOptions) {
	if k == 0 && !opt.FinalStepNoise {
		copy(out, mean)
		return
	}
	for i := range out {
		out[i] = mean[i] + float64(math.Exp(0.5*logVar[i])*noise[i])
	}
}

// GaussianLogDensity is log N(x; mean, diag(exp(logVar))), summed over dimensions.
func GaussianLogDensity(x, mean, logVar []float64) float64 {
	const log2Pi = 1.8378770664093453
	sum := 0.0
	for i := range x {
		d := x[i] - mean[i]
		sum += -0.5 * (log2Pi + logVar[i] + d*d*math.Exp(-logVar[i]))
	}
	return sum
}

// GuidedEpsilon mixes conditional and unconditional epsilon for classifier-free guidance:
// out = uncond + scale*(cond - uncond). Only epsilon is guided; each half keeps its own
// variance output v. The mix is computed in float64 (as the reference sampler does) and
// rounded once.
func GuidedEpsilon(cond, uncond []float32, scale float64, out []float32) {
	for i := range out {
		out[i] = float32(float64(uncond[i]) + float64(scale*(float64(cond[i])-float64(uncond[i]))))
	}
}

// LinearCFGScale is MAR's linear guidance schedule: 1 + (cfg-1)*known/L, with known the
// number of tokens known after the current AR step.
func LinearCFGScale(cfg float64, knownAfterStep, seqLen int) float64 {
	return 1 + (cfg-1)*float64(knownAfterStep)/float64(seqLen)
}

// Trace summarises one token's reverse run: what density ratios between two runs need.
type Trace struct {
	SumHalfLogVar        float64   // over steps k >= 1: half the log-determinant of the step covariance
	LastMean, LastLogVar []float64 // the Gaussian of the last step, p(x0 | x1)
}

// Record adds step k's Gaussian to the trace.
func (tr *Trace) Record(k int, mean, logVar []float64) {
	if k == 0 {
		tr.LastMean = append(tr.LastMean[:0], mean...)
		tr.LastLogVar = append(tr.LastLogVar[:0], logVar...)
		return
	}
	for _, lv := range logVar {
		tr.SumHalfLogVar += lv / 2
	}
}
