package scoring

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type fakeRow struct {
	config      string
	fid, speed  float64
	twoSample   float64
	secondOfRef bool
}

func writeFakeRun(t *testing.T, seed, refSeed uint64, cfg float64, reference string, rows ...fakeRow) string {
	t.Helper()
	dir := t.TempDir()
	s := FrontierSettings{Settings: Settings{N: 2000, Seed: seed, CFG: cfg, Temperature: 1, Target: "target"}, Reference: reference, ReferenceSeed: refSeed}
	var out []frontierRow
	for _, r := range rows {
		out = append(out, frontierRow{Config: r.config, configResult: configResult{FID: r.fid}, ImagesPerSec: r.speed,
			TwoSampleFID: r.twoSample, ReferenceFloor: r.secondOfRef})
	}
	data, _ := json.Marshal(map[string]any{"settings": s, "results": out})
	if err := os.WriteFile(filepath.Join(dir, "frontier.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Two seeds as scripts/bench/frontier_samplers.sh runs them: seed 1 holds the reference (also drawn
// again at seed 2), seed 2 does not; every configuration's paired difference uses the
// reference's FID at its own seed, speeds come from the run holding the reference.
func TestPairedAcrossSeeds(t *testing.T) {
	s1 := writeFakeRun(t, 1, 2, 1, "target",
		fakeRow{config: "target", fid: 40, speed: 5, twoSample: 1.0},
		fakeRow{config: "fast", fid: 41, speed: 40},
		fakeRow{config: "fastest", fid: 44, speed: 70},
		fakeRow{config: "good", fid: 38, speed: 30},
		fakeRow{config: "target (seed 2)", fid: 38, speed: 5, secondOfRef: true})
	s2 := writeFakeRun(t, 2, 3, 1, "fast",
		fakeRow{config: "fast", fid: 38.5, speed: 42, twoSample: 2},
		fakeRow{config: "fastest", fid: 42, speed: 75},
		fakeRow{config: "good", fid: 36, speed: 33},
		fakeRow{config: "fast (seed 3)", fid: 39, speed: 42, secondOfRef: true})
	rep, err := Paired([]string{s2, s1}, nil, "target")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Noise != 1.0 || len(rep.Seeds) != 2 || rep.Seeds[0] != 1 {
		t.Fatalf("noise %v seeds %v: want the reference's own floor, 1.0, and seeds [1 2]", rep.Noise, rep.Seeds)
	}
	byName := map[string]PairedRow{}
	for _, r := range rep.Rows {
		byName[r.Config] = r
	}
	want := map[string]struct{ mean, speed float64 }{
		"fast":    {(1 + 0.5) / 2, 8},
		"fastest": {(4 + 4) / 2, 14},
		"good":    {(-2 - 2) / 2, 6},
	}
	for name, w := range want {
		r := byName[name]
		if r.MeanPaired == nil || math.Abs(*r.MeanPaired-w.mean) > 1e-9 || math.Abs(r.Speedup-w.speed) > 1e-9 || r.SpeedRuns != 1 {
			t.Errorf("%s: %+v, want mean paired %v and speed %vx from seed 1's run", name, r, w.mean, w.speed)
		}
	}
	if _, ok := byName["target"].Paired[2]; ok {
		t.Errorf("the reference has no run at seed 2 of its own and must not be paired there: %+v", byName["target"])
	}
	// fastest is 4 FID worse (beyond the floor of 1): not within noise; fast at +0.75 is, and
	// good (faster than the reference, better FID) is Pareto but slower than fast
	if rep.Best != "fast" || !byName["fast"].WithinNoise || byName["fastest"].WithinNoise || !byName["good"].Pareto {
		t.Errorf("recommended %q; rows %+v", rep.Best, rep.Rows)
	}
	var md strings.Builder
	if err := rep.Markdown(&md); err != nil || !strings.Contains(md.String(), "| fast | 8.00x | 41.00 | 38.50 | +1.00 | +0.50 | +0.75 |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

func TestPairedRefusals(t *testing.T) {
	s1 := writeFakeRun(t, 1, 2, 1, "target", fakeRow{config: "target", fid: 40, speed: 5, twoSample: 1}, fakeRow{config: "target (seed 2)", fid: 38, secondOfRef: true})
	s3 := writeFakeRun(t, 3, 4, 1, "fast", fakeRow{config: "fast", fid: 40, speed: 5, twoSample: 1}, fakeRow{config: "fast (seed 4)", fid: 38, secondOfRef: true})
	cfg3 := writeFakeRun(t, 2, 3, 3, "fast", fakeRow{config: "fast", fid: 40, speed: 5, twoSample: 1}, fakeRow{config: "fast (seed 3)", fid: 38, secondOfRef: true})
	for _, c := range []struct {
		dirs []string
		want string
	}{
		{[]string{s1}, "two or more run folders"},
		{[]string{s1, s1}, "all at seed 1"},
		{[]string{s1, s3}, `no FID of the reference "target" at seed 3`},
		{[]string{s1, cfg3}, "differ in cfg"},
		{[]string{s1, t.TempDir()}, "frontier.json"},
	} {
		if _, err := Paired(c.dirs, nil, "target"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.dirs, err, c.want)
		}
	}
}

// Speed runs replace the FID runs' speeds: at any N and seed, of the same cfg, their ratios to
// the reference are the only ones averaged; FIDs and the recommendation still follow the pairs.
func TestPairedSpeedRuns(t *testing.T) {
	s1 := writeFakeRun(t, 1, 2, 1, "target",
		fakeRow{config: "target", fid: 40, speed: 5, twoSample: 1.0},
		fakeRow{config: "fast", fid: 40.5, speed: 40},
		fakeRow{config: "target (seed 2)", fid: 38, speed: 5, secondOfRef: true})
	s2 := writeFakeRun(t, 2, 3, 1, "fast", fakeRow{config: "fast", fid: 38.5, speed: 42, twoSample: 2},
		fakeRow{config: "fast (seed 3)", fid: 39, speed: 42, secondOfRef: true})
	quiet := writeFakeRun(t, 7, 8, 1, "target",
		fakeRow{config: "target", fid: 45, speed: 10, twoSample: 3},
		fakeRow{config: "fast", fid: 47, speed: 60},
		fakeRow{config: "unmeasured", fid: 47, speed: 90},
		fakeRow{config: "target (seed 8)", fid: 44, speed: 10, secondOfRef: true})
	rep, err := Paired([]string{s1, s2}, []string{quiet}, "target")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if r.Config == "unmeasured" {
			t.Errorf("a configuration only in the speed run must not be reported: %+v", r)
		}
		if r.Config == "fast" && (r.Speedup != 6 || r.SpeedRuns != 1 || *r.MeanPaired != 0.5) {
			t.Errorf("fast: %+v, want 6x from the speed run alone and the pairs' mean +0.5", r)
		}
	}
	if rep.Noise != 1 || rep.Best != "fast" {
		t.Errorf("noise %v, recommended %q: the FID runs' floor (1) and fast", rep.Noise, rep.Best)
	}
	png := filepath.Join(t.TempDir(), "paired.png")
	if err := rep.Plot(png); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v %v", st, err)
	}
	var md strings.Builder
	if err := rep.Markdown(&md); err != nil || !strings.Contains(md.String(), "speeds from "+quiet+" only") {
		t.Errorf("the report must name where its speeds come from:\n%s", md.String())
	}
	cfg3 := writeFakeRun(t, 7, 8, 3, "target", fakeRow{config: "target", fid: 40, speed: 5, twoSample: 1}, fakeRow{config: "target (seed 8)", fid: 38, secondOfRef: true})
	if _, err := Paired([]string{s1, s2}, []string{cfg3}, "target"); err == nil || !strings.Contains(err.Error(), "differs from") {
		t.Errorf("a speed run at another cfg: %v", err)
	}
}
