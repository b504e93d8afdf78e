package scoring

import (
	"fmt"
	"path/filepath"
	"strconv"

	"marspec/render"
)

// writePlots draws alpha against gamma, alpha per AR step (the paper's Fig. 9) and FID against
// measured speedup for the run's configurations.
func writePlots(dir string, s Settings, gens []chunkGenerator, rows []configResult) error {
	byGroup := map[string]*render.Series{}
	var steps, tradeoff []render.Series
	for i, r := range rows {
		g := gens[i]
		sp := 1.0
		if r.Speedup != nil {
			sp = *r.Speedup
		}
		tradeoff = append(tradeoff, render.Series{Name: r.Description, X: []float64{sp}, Y: []float64{r.FID}, Points: true})
		if r.Alpha == nil {
			continue
		}
		if gv, err := strconv.Atoi(g.gamma); err == nil {
			s := byGroup[g.group]
			if s == nil {
				s = &render.Series{Name: g.group}
				byGroup[g.group] = s
			}
			s.X, s.Y = append(s.X, float64(gv)), append(s.Y, *r.Alpha)
		}
		st := render.Series{Name: r.Description}
		for k, a := range r.AlphaAtStep {
			if a >= 0 {
				st.X, st.Y = append(st.X, float64(k)), append(st.Y, a)
			}
		}
		steps = append(steps, st)
	}
	var gammas []render.Series
	for _, s := range byGroup {
		gammas = append(gammas, *s)
	}
	sample := fmt.Sprintf(", N = %d per configuration, seed %d, cfg %g", s.N, s.Seed, s.CFG)
	charts := []struct {
		file, title, x, y string
		series            []render.Series
	}{
		{"alpha_vs_gamma.png", "acceptance rate vs gamma" + sample, "gamma", "alpha", gammas},
		{"alpha_per_step.png", "acceptance rate per AR step (Fig. 9)" + sample, "AR step", "alpha", steps},
		{"fid_vs_speedup.png", "quality vs speed" + sample, "speedup vs target-only", "FID (lower is better)", tradeoff},
	}
	for _, c := range charts {
		if len(c.series) == 0 {
			continue
		}
		if err := render.Chart(filepath.Join(dir, c.file), c.title, c.x, c.y, c.series); err != nil {
			return err
		}
	}
	return nil
}
