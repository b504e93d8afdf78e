package mar

import (
	"fmt"
	"math"

	"marspec/diffusion"
)

// runFused is Run through the fused graph: the same head, the same float64 step arithmetic,
// one call for all steps.
func (d *Denoiser) runFused(loop LoopRunner, rows []DenoiseRow, x0 [][]float64, traces []diffusion.Trace) error {
	n, dim, width, steps := len(rows), d.Head.TokenDim(), d.Head.Width(), d.Schedule.Steps()
	guided := rows[0].ZUncond != nil
	halves := condHalves(guided)
	for _, row := range rows {
		if (row.ZUncond != nil) != guided {
			return fmt.Errorf("denoise: rows mix guided and unguided sampling")
		}
		if len(row.Noise.Eps) < steps {
			return fmt.Errorf("denoise: a row has noise for %d steps, the schedule takes %d", len(row.Noise.Eps), steps)
		}
	}
	return loop.RunLoop(n, steps, halves, func(in LoopInputs) {
		for r, row := range rows {
			copy(in.XT[r*dim:(r+1)*dim], row.Noise.XT)
			copy(in.Z[r*width:(r+1)*width], row.Z)
			in.CFG[r] = 1 // unguided: the graph's uncond rows are the cond rows, and any scale gives eps
			if guided {
				copy(in.Z[(n+r)*width:(n+r+1)*width], row.ZUncond)
				in.CFG[r] = row.CFG
			}
			for i := 0; i < steps; i++ {
				copy(in.Noise[(i*n+r)*dim:(i*n+r+1)*dim], row.Noise.Eps[i])
			}
			if !d.Options.FinalStepNoise { // MAR's last step returns the mean
				clear(in.Noise[((steps-1)*n+r)*dim : ((steps-1)*n+r+1)*dim])
			}
		}
		d.fillSchedule(in)
	}, func(out LoopOutputs) {
		for r := range rows {
			copy(x0[r], out.X0[r*dim:(r+1)*dim])
			if traces == nil {
				continue
			}
			// Summed in the per-step path's order (step by step, then by dimension): equal sums.
			tr := diffusion.Trace{}
			for i := 0; i < steps-1; i++ {
				for _, h := range out.HalfLogVar[(i*n+r)*dim : (i*n+r+1)*dim] {
					tr.SumHalfLogVar += h
				}
			}
			tr.LastMean = append(traces[r].LastMean[:0], out.LastMean[r*dim:(r+1)*dim]...)
			last := (steps-1)*n + r
			tr.LastLogVar = traces[r].LastLogVar[:0]
			for _, h := range out.HalfLogVar[last*dim : (last+1)*dim] {
				tr.LastLogVar = append(tr.LastLogVar, 2*h)
			}
			traces[r] = tr
		}
	})
}

// fillSchedule writes the per-step coefficients in the order steps are taken. They are
// recomputed from the schedule's alpha-bars and betas with diffusion's own formulas (so they
// are the same float64 values); TestFusedMatchesPerStep would catch any drift.
func (d *Denoiser) fillSchedule(in LoopInputs) {
	s, opt := d.Schedule, d.Options
	tempLog := 0.0
	if opt.Temperature > 0 && opt.Temperature != 1 {
		tempLog = 2 * math.Log(opt.Temperature)
	}
	steps := s.Steps()
	for i := 0; i < steps; i++ {
		k := steps - 1 - i
		acp, b, prev := s.AlphaBar(k), s.Beta(k), 1.0
		if k > 0 {
			prev = s.AlphaBar(k - 1)
		}
		c := in.Coef[i*numCoefs : (i+1)*numCoefs]
		c[coefSqrtRecipAcp] = math.Sqrt(1 / acp)
		c[coefSqrtRecipM1Acp] = math.Sqrt(1/acp - 1)
		c[coefMean1] = b * math.Sqrt(prev) / (1 - acp)
		c[coefMean2] = (1 - prev) * math.Sqrt(1-b) / (1 - acp)
		c[coefHalfLogVar0] = (s.PosteriorLogVariance(k) + tempLog) / 2
		c[coefHalfLogVar1] = (s.LogBeta(k) - s.PosteriorLogVariance(k)) / 4
		in.T[i] = float32(s.TrainingTimestep(k))
	}
	in.Clip[0], in.Clip[1] = math.Inf(-1), math.Inf(1)
	if opt.ClipX0 {
		in.Clip[0], in.Clip[1] = -1, 1
	}
}
