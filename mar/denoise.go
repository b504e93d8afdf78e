package mar

import (
	"fmt"

	"marspec/diffusion"
)

// DenoiseRow is one token to sample: its conditioning vector(s), guidance scale and noise.
type DenoiseRow struct {
	Z       []float32 // [W] conditional
	ZUncond []float32 // [W] unconditional (fake class); nil when CFG is off
	CFG     float64
	Noise   *diffusion.TokenNoise
}

// Denoiser runs the reverse diffusion of a diffusion head for many rows at once: in one call
// of the pack's fused graph when the head offers one (LoopHead), else one head call per
// sampling step (two halves when guided) with the step in Go. Buffers are reused between calls.
type Denoiser struct {
	Head     Head
	Schedule *diffusion.Schedule
	Options  diffusion.StepOptions
	// PerStep keeps the one-call-per-step path even when a fused graph exists (to compare them).
	PerStep bool
	// Sampler and Eta choose the reverse process; "" is ddpm.
	Sampler diffusion.Sampler
	Eta     float64
	// distilled runs sampler distilled (Model.NewDenoiser sets it)
	distilled *distilledSampler

	states []diffusion.SamplerState

	xt, t, z, out, eps, v []float32
	mean, logVar          []float64
}

// Run samples every row. x0 receives [rows][D]; traces, when non-nil, receives per row the
// summary of its run (reset first).
func (d *Denoiser) Run(rows []DenoiseRow, x0 [][]float64, traces []diffusion.Trace) error {
	n := len(rows)
	if n == 0 {
		return nil
	}
	if d.Sampler == diffusion.Distilled { // the student replaces the head: no per-step Go arithmetic
		return d.runDistilled(rows, x0)
	}
	// The fused graph (mar/headloop.go, used on CUDA) bakes in the ddpm step; any other sampler
	// takes the per-step path, which runs its step in Go.
	ddpm := d.Sampler == "" || d.Sampler == diffusion.DDPM
	if lh, ok := d.Head.(LoopHead); ok && !d.PerStep && ddpm {
		if loop := lh.HeadLoop(); loop != nil {
			return d.runFused(loop, rows, x0, traces)
		}
	}
	dim, width := d.Head.TokenDim(), d.Head.Width()
	guided := rows[0].ZUncond != nil
	calls := n
	if guided {
		calls = 2 * n
	}
	d.xt = grow(d.xt, calls*dim)
	d.t = grow(d.t, calls)
	d.z = grow(d.z, calls*width)
	d.out = grow(d.out, calls*2*dim)
	d.eps = grow(d.eps, dim)
	d.v = grow(d.v, dim)
	for r, row := range rows {
		if (row.ZUncond != nil) != guided {
			return fmt.Errorf("denoise: rows mix guided and unguided sampling")
		}
		copy(d.z[r*width:], row.Z)
		if guided {
			copy(d.z[(n+r)*width:], row.ZUncond)
		}
		copy(x0[r], row.Noise.XT)
		if traces != nil {
			traces[r] = diffusion.Trace{}
		}
	}
	d.mean, d.logVar = growF64(d.mean, dim), growF64(d.logVar, dim)
	if len(d.states) < n {
		d.states = make([]diffusion.SamplerState, n)
	}
	for r := 0; r < n; r++ {
		d.states[r].Reset()
	}
	mean, logVar := d.mean, d.logVar
	predict := func() error {
		return d.Head.Predict(d.xt[:calls*dim], d.t[:calls], d.z[:calls*width], calls, d.out[:calls*2*dim])
	}
	if bh, ok := d.Head.(BindableHead); ok { // z is the same at every step: bound once
		bound, err := bh.BindZ(d.z[:calls*width], calls)
		if err != nil {
			return err
		}
		if bound != nil {
			defer bound.Close()
			predict = func() error { return bound.Predict(d.xt[:calls*dim], d.t[:calls], d.out[:calls*2*dim]) }
		}
	}
	steps := d.Schedule.Steps()
	for i := 0; i < steps; i++ {
		k := steps - 1 - i
		tt := float32(d.Schedule.TrainingTimestep(k))
		for r := range rows {
			for j := 0; j < dim; j++ {
				d.xt[r*dim+j] = float32(x0[r][j])
			}
			d.t[r] = tt
			if guided {
				copy(d.xt[(n+r)*dim:(n+r+1)*dim], d.xt[r*dim:(r+1)*dim])
				d.t[n+r] = tt
			}
		}
		if err := predict(); err != nil {
			return err
		}
		for r, row := range rows {
			cond := d.out[r*2*dim : (r+1)*2*dim]
			copy(d.v, cond[dim:])
			if guided {
				uncond := d.out[(n+r)*2*dim : (n+r+1)*2*dim]
				diffusion.GuidedEpsilon(cond[:dim], uncond[:dim], row.CFG, d.eps)
			} else {
				copy(d.eps, cond[:dim])
			}
			if ddpm {
				d.Schedule.Posterior(k, x0[r], d.eps, d.v, d.Options, mean, logVar)
				if traces != nil {
					traces[r].Record(k, mean, logVar)
				}
				d.Schedule.Step(k, mean, logVar, row.Noise.Eps[i], x0[r], d.Options)
				continue
			}
			// No trace: speculative decoding is refused for other samplers (generation.ValidateRequest).
			d.Schedule.SampleStep(d.Sampler, d.Eta, k, x0[r], d.eps, d.v, row.Noise.Eps[i], d.Options, &d.states[r], mean, logVar, x0[r])
		}
	}
	return nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func growF64(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}
