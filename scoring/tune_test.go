package scoring

import "testing"

// The rules on a report shaped like the embedded pair's: fast is the fastest point within the
// floor that is no worse than balanced (not the faster head point that is worse than it, nor a
// point off the Pareto front), balanced the fastest training-free point within the floor,
// quality the best mean; without a training-free point fast is the fastest within the floor.
func TestTuneRules(t *testing.T) {
	row := func(config string, speed, paired float64, pareto, within bool) PairedRow {
		return PairedRow{Config: config, Speedup: speed, MeanPaired: &paired, Pareto: pareto, WithinNoise: within}
	}
	rows := []PairedRow{
		row("target:num_iter=2:steps=1:sampler=distilled", 33, -2, true, true),
		row("target:num_iter=3:steps=1:sampler=distilled:temperature=0.9", 27, -9, true, true),
		row("target:num_iter=3:steps=1:sampler=distilled", 26, -10, false, true),
		row("target:num_iter=3:steps=10:sampler=ddim:eta=1", 13, -8, true, true),
		row("target:num_iter=4:steps=25:sampler=ddim:eta=1", 7, -12, true, true),
		row("target:num_iter=1", 40, 5, true, false),
		row("spec:verify=group", 50, -20, true, true),
	}
	chosen, missing := (&PairedReport{Rows: rows}).Choose()
	want := map[string]string{"fast": rows[1].Config, "balanced": rows[3].Config, "quality": rows[4].Config}
	if len(missing) != 0 || len(chosen) != 3 {
		t.Fatalf("chosen %v, missing %v", chosen, missing)
	}
	for _, c := range chosen {
		if c.Row.Config != want[c.Name] {
			t.Errorf("%s: %s, want %s", c.Name, c.Row.Config, want[c.Name])
		}
	}
	heads := []PairedRow{rows[0], rows[1]}
	chosen, missing = (&PairedReport{Rows: heads}).Choose()
	if len(chosen) != 2 || chosen[0].Name != "fast" || chosen[0].Row.Config != rows[0].Config || len(missing) != 1 || missing[0] != "balanced" {
		t.Errorf("without a training-free point: chosen %v, missing %v", chosen, missing)
	}
}
