package analytic

import (
	"math"
	"strconv"

	"marspec/mar"
)

// DistilledTimes are the analytic distilled head's K-step times (those scripts/train/distill_head.py
// trains).
var DistilledTimes = map[int][]int{1: {999}, 2: {999, 500}, 4: {999, 749, 500, 250}}

// WithDistilled gives model m (built by New) an exact distilled head with a distilled_head
// manifest entry: the endpoint of the probability-flow ODE of its Gaussian data, so the
// distilled sampler's law is known in closed form. Guided, the head's epsilon mixes linearly in
// the mean, so the guided teacher is the Gaussian with mean mu_u + w (mu_c - mu_u) and the same
// scale; the student maps x_t to that Gaussian's endpoint.
func WithDistilled(m *mar.Model, cfgMax float64) *mar.Model {
	spec := &mar.DistilledHeadSpec{File: "distilled_head.onnx", Format: mar.DistilledHeadFormat,
		Times: map[string][]int{}, CFGMax: cfgMax, Predicts: "x0"}
	for _, k := range []int{1, 2, 4} {
		spec.Steps = append(spec.Steps, k)
		spec.Times[strconv.Itoa(k)] = DistilledTimes[k]
	}
	m.Manifest.DistilledHead = spec
	m.Distilled = &Distilled{dim: m.Manifest.TokenDim, alphaBar: trainingAlphaBar()}
	return m
}

// Distilled is the analytic mar.DistilledHead; z is (mean per dimension..., log scale) as the
// analytic transformer makes it.
type Distilled struct {
	dim      int
	alphaBar []float64
	// Calls counts Predict calls (one per step, whatever the guidance)
	Calls int
}

func (d *Distilled) Predict(xt, t, z, zu, cfg []float32, n int, x0 []float32) error {
	d.Calls++
	D, W := d.dim, d.dim+1
	for r := 0; r < n; r++ {
		ab := d.alphaBar[int(t[r])]
		s := math.Exp(float64(z[r*W+D]))
		w := float64(cfg[r])
		for i := 0; i < D; i++ {
			mu := float64(zu[r*W+i]) + w*(float64(z[r*W+i])-float64(zu[r*W+i]))
			x := float64(xt[r*D+i])
			// x_t ~ N(sqrt(ab) mu, ab s^2 + 1 - ab); the ODE keeps each point's standard score
			x0[r*D+i] = float32(mu + s*(x-math.Sqrt(ab)*mu)/math.Sqrt(ab*s*s+1-ab))
		}
	}
	return nil
}
