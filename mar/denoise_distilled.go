package mar

import (
	"fmt"
	"math"

	"marspec/diffusion"
)

// distilledSampler is what a Denoiser needs to run the distilled head: the student, the
// training timesteps of its K-step run and the training schedule, unrespaced (its alphabar
// re-noises between steps).
type distilledSampler struct {
	head     DistilledHead
	times    []int
	training *diffusion.Schedule

	xt, t, z, zu, cfg, out []float32
}

// runDistilled is the consistency models' multistep sampler: x0 = f(x_T, t_0); for each later
// time t_i, x_{t_i} = sqrt(abar) x0 + sqrt(1 - abar) Eps[i], x0 = f(x_{t_i}, t_i). The noise is
// the row's own TokenNoise (x_T, then Eps[i] for step i; Eps[0] is drawn but unused), so a
// token still depends only on (seed, image, position, options). Guided rows pass both
// conditioning vectors and their scale to the one student call; unguided rows pass z twice
// and scale 1, as the student was trained. Final-step noise does not apply (the run ends at
// the student's x0, as ddim's does).
//
// Temperature multiplies x_T and the re-noising Eps, as MAR's temperature multiplies the
// noise its reverse steps inject: for a one-step generator this is the truncation of its
// input noise, which trades spread for fidelity (docs/FRONTIER.md measures where FID gains).
func (d *Denoiser) runDistilled(rows []DenoiseRow, x0 [][]float64) error {
	ds := d.distilled
	if ds == nil {
		return fmt.Errorf("denoise: sampler distilled, but the pack has no distilled head")
	}
	n, dim := len(rows), len(x0[0])
	width := len(rows[0].Z)
	ds.xt, ds.t, ds.out = grow(ds.xt, n*dim), grow(ds.t, n), grow(ds.out, n*dim)
	ds.z, ds.zu, ds.cfg = grow(ds.z, n*width), grow(ds.zu, n*width), grow(ds.cfg, n)
	for r, row := range rows {
		copy(ds.z[r*width:], row.Z)
		if row.ZUncond != nil {
			copy(ds.zu[r*width:], row.ZUncond)
			ds.cfg[r] = float32(row.CFG)
		} else {
			copy(ds.zu[r*width:], row.Z)
			ds.cfg[r] = 1
		}
		if len(row.Noise.Eps) < len(ds.times) {
			return fmt.Errorf("denoise: %d noise steps for a %d-step distilled run", len(row.Noise.Eps), len(ds.times))
		}
	}
	temp := d.Options.NoiseScale()
	for i, t := range ds.times {
		ab := ds.training.AlphaBar(t)
		a, s := math.Sqrt(ab), math.Sqrt(1-ab)
		for r, row := range rows {
			xt := ds.xt[r*dim : (r+1)*dim]
			for j := range xt {
				if i == 0 {
					xt[j] = float32(temp * row.Noise.XT[j])
				} else {
					xt[j] = float32(a*x0[r][j] + s*temp*row.Noise.Eps[i][j])
				}
			}
			ds.t[r] = float32(t)
		}
		if err := ds.head.Predict(ds.xt, ds.t, ds.z, ds.zu, ds.cfg, n, ds.out); err != nil {
			return err
		}
		for r := range rows {
			for j := range x0[r] {
				v := float64(ds.out[r*dim+j])
				if d.Options.ClipX0 {
					v = math.Max(-1, math.Min(1, v))
				}
				x0[r][j] = v
			}
		}
	}
	return nil
}
