package scoring

import "testing"

func TestMarkFrontier(t *testing.T) {
	row := func(cfg string, ips, fid, twoSample float64) frontierRow {
		r := frontierRow{Config: cfg, ImagesPerSec: ips, TwoSampleFID: twoSample}
		r.FID = fid
		return r
	}
	rows := []frontierRow{
		row("target", 10, 40, 1.0), // reference: noise scale 1.0; "fast" is faster and within it
		row("fast", 30, 40.5, 0),   // faster, within noise: Pareto
		row("faster", 60, 45, 0),   // fastest, outside noise: Pareto
		row("slow", 5, 41, 0),      // dominated by the reference
		row("better", 8, 39, 0),    // slower and better by less than the noise: dominated by target
		row("best", 7, 37, 0),      // slower and better by more than the noise: Pareto
		row("tie", 30, 41, 0),      // as fast as "fast", worse: dominated
	}
	markFrontier(rows, FrontierSettings{Reference: "target"})
	want := map[string][2]bool{"target": {false, true}, "fast": {true, true}, "faster": {true, false},
		"slow": {false, true}, "better": {false, true}, "best": {true, true}, "tie": {false, true}}
	for _, r := range rows {
		if w := want[r.Config]; r.Pareto != w[0] || r.WithinNoise != w[1] {
			t.Fatalf("%s: pareto %v within noise %v, want %v", r.Config, r.Pareto, r.WithinNoise, w)
		}
	}
	// without a reference the noise is 0: raw dominance, so "better" and the old reference stay
	raw := append([]frontierRow(nil), rows...)
	markFrontier(raw, FrontierSettings{Reference: "none of them"})
	for _, r := range raw {
		if wantPareto := r.Config != "slow" && r.Config != "tie"; r.Pareto != wantPareto {
			t.Fatalf("raw rule: %s pareto %v, want %v", r.Config, r.Pareto, wantPareto)
		}
	}
	if best := recommended(rows); best == nil || best.Config != "fast" || best.SpeedupVsRef != 3 {
		t.Fatalf("recommended %+v, want fast at 3x", best)
	}
}
