package bench

import (
	"strings"
	"testing"
)

// bench --spec --drafts pack,exit --exit-max-errors 0,0.3 adds one exit row per bound, for
// prefix + batched rounds only; lists that cannot give an exit row are refused at once.
func TestBenchSpecExitGrid(t *testing.T) {
	b := SpecGrid{Gammas: "4", Prefills: "0.05", Verifies: "prefix,group", Acceptances: "exact", Schedules: "batched,lazy",
		Drafts: "pack, exit", ExitMaxErrors: "0,0.3", Rejections: "residual", Tolerances: "0", AblationGamma: 4}
	grid, _, err := b.Configs()
	if err != nil {
		t.Fatal(err)
	}
	var bounds []float64
	pack := 0
	for _, sf := range grid {
		if !sf.EarlyExit {
			pack++
			continue
		}
		if sf.Verify != "prefix" || sf.Schedule != "batched" {
			t.Errorf("exit row with %s/%s", sf.Verify, sf.Schedule)
		}
		bounds = append(bounds, sf.ExitMaxError)
	}
	if pack != 3 || len(bounds) != 2 || bounds[0] != 0 || bounds[1] != 0.3 {
		t.Fatalf("%d pack rows (want 3: prefix batched, prefix lazy, group), exit bounds %v (want 0, 0.3)", pack, bounds)
	}
	for _, c := range []struct {
		edit func(*SpecGrid)
		want string
	}{
		{func(b *SpecGrid) { b.Verifies = "group" }, "allowed: prefix in --verifies and batched in --schedules"},
		{func(b *SpecGrid) { b.Drafts = "pack" }, "apply to draft exit only"},
		{func(b *SpecGrid) { b.ExitMaxErrors = "0,-1" }, "exit_max_error -1: out of range"},
		{func(b *SpecGrid) { b.ExitMaxErrors = "a" }, `exit max error "a" is not a number`},
		{func(b *SpecGrid) { b.Drafts = "pack,exits" }, "allowed: pack, self, exit"},
	} {
		bad := b
		c.edit(&bad)
		if _, _, err := bad.Configs(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", bad, err, c.want)
		}
	}
}
