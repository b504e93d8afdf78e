package scoring

import (
	"strings"
	"testing"
)

// The rules on the embedded pair's CFG 1 report of the 2026-11-26 temperature runs (speeds and mean paired FIDs
// rounded; noise floor 1): the head points dominate the 10-step ddim point, yet it stays
// balanced (a pack without the head runs it); fast is the fastest Pareto point no worse than
// balanced (num_iter 3 with the head, not the faster num_iter 2 that is 3.4 worse); quality is
// the best Pareto mean. Without a training-free point fast is the fastest within the floor.
func TestTuneRules(t *testing.T) {
	row := func(config string, speed, paired float64, within bool) PairedRow {
		return PairedRow{Config: config, Speedup: speed, MeanPaired: &paired, SpeedRuns: 1, WithinNoise: within}
	}
	rows := []PairedRow{
		row("target:num_iter=3:steps=10:sampler=ddim:eta=1", 11.9, -8.3, true),
		row("target:num_iter=3:steps=10:sampler=ddim:eta=1:temperature=0.9", 11.2, -8.8, true),
		row("target:num_iter=4:steps=25:sampler=ddim:eta=1:temperature=0.9", 6.0, -14.7, true),
		row("target:num_iter=2:steps=1:sampler=distilled:temperature=0.85", 29.6, -4.9, true),
		row("target:num_iter=3:steps=1:sampler=distilled:temperature=0.9", 20.7, -9.3, true),
		row("target:num_iter=3:steps=1:sampler=distilled:temperature=0.85", 20.3, -9.6, true),
		row("target:num_iter=1", 40, 5, false),
		row("spec:verify=prefix:acceptance=exact", 0.7, -0.1, true),
	}
	rep := &PairedReport{Rows: rows, Noise: 1}
	markPaired(rep)
	if rep.Rows[0].Pareto {
		t.Fatalf("the 10-step ddim point should be dominated by the head's (the case balanced's rule is for)")
	}
	chosen, missing := rep.Choose()
	want := map[string]string{"fast": rows[4].Config, "balanced": rows[0].Config, "quality": rows[2].Config}
	if len(missing) != 0 || len(chosen) != 3 {
		t.Fatalf("chosen %v, missing %v", chosen, missing)
	}
	for _, c := range chosen {
		if c.Row.Config != want[c.Name] {
			t.Errorf("%s: %s, want %s", c.Name, c.Row.Config, want[c.Name])
		}
	}
	// the paired table names the same picks as tune, beside the fastest point within the floor
	var md strings.Builder
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Fastest Pareto point with mean paired FID within the noise floor: `" + rows[3].Config + "`",
		"- fast: `" + rows[4].Config + "` (20.70x, -9.30)", "- balanced: `" + rows[0].Config + "`", "- quality: `" + rows[2].Config + "`"} {
		if !strings.Contains(md.String(), line) {
			t.Errorf("the paired table lacks %q:\n%s", line, md.String())
		}
	}
	heads := &PairedReport{Rows: []PairedRow{rows[3], rows[4]}, Noise: 1}
	markPaired(heads)
	chosen, missing = heads.Choose()
	if len(chosen) != 2 || chosen[0].Name != "fast" || chosen[0].Row.Config != rows[3].Config || len(missing) != 1 || missing[0] != "balanced" {
		t.Errorf("without a training-free point: chosen %v, missing %v", chosen, missing)
	}
	md.Reset()
	if err := heads.Markdown(&md); err != nil || !strings.Contains(md.String(), "- balanced: no row satisfies its rule") {
		t.Errorf("the paired table should say no row satisfies balanced's rule (%v):\n%s", err, md.String())
	}
}
