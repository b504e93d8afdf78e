package scoring

import (
	"math"
	"strings"
	"testing"
)

// The one-sided paired t-test over seeds, with df = seeds - 1 (critical t 2.920 at 0.05 for
// three seeds): consistent small costs are worse, a mean at or below zero never is, and scatter
// around a small mean is not enough.
func TestPairedWorse(t *testing.T) {
	for _, c := range []struct {
		d     []float64
		worse bool
	}{
		{[]float64{0.60, 0.64, 0.67}, true},   // balanced at int8 (2026-11-26 runs): t = 27
		{[]float64{0.00, -0.03, 0.01}, false}, // fast at int8: mean below zero
		{[]float64{0.1, 0.1, 0.1}, true},      // identical and above zero
		{[]float64{0.5, -0.4, 0.3}, false},    // mean 0.13, t = 0.49
		{[]float64{0.30, 0.10, 0.20}, true},   // t = 3.46
		{[]float64{0.30, 0.05, 0.20}, false},  // t = 2.62 < 2.92
		{[]float64{0.4}, false},               // one seed: no test
	} {
		mean, worse := pairedWorse(c.d, 0.05)
		want := 0.0
		for _, x := range c.d {
			want += x / float64(len(c.d))
		}
		if worse != c.worse || math.Abs(mean-want) > 1e-12 {
			t.Errorf("%v: mean %v worse %v, want %v %v", c.d, mean, worse, want, c.worse)
		}
	}
}

// A reduced-precision row measurably worse than its fp32 twin leaves the frontier, so the twin
// it would have dominated within the floor is Pareto again and tune chooses it; a twin at no
// cost stays and is chosen for its speed.
func TestTwinsOnTheFrontier(t *testing.T) {
	row := func(cfg string, fid, speed float64) fakeRow { return fakeRow{config: cfg, fid: fid, speed: speed} }
	fast, mid, best := "target:num_iter=3:steps=1:sampler=distilled", "target:num_iter=3:steps=10:sampler=ddim:eta=1", "target:num_iter=4:steps=25:sampler=ddim:eta=1"
	seed := func(s uint64, shift, cost float64) string {
		return writeFakeRun(t, s, s+10, 1, "target",
			fakeRow{config: "target", fid: 40, speed: 10, twoSample: 1},
			row(fast, 30+shift, 220), row(fast+":precision=int8", 30+shift-0.01, 290),
			row(mid, 32+shift, 130), row(mid+":precision=int8", 32+shift+cost+0.05, 190),
			row(best, 25+shift, 65), row(best+":precision=int8", 25+shift+cost, 100),
			fakeRow{config: "target (second sample)", fid: 40.5, speed: 10, secondOfRef: true})
	}
	rep, err := Paired([]string{seed(1, 0, 0.59), seed(2, 0.7, 0.57), seed(3, -0.4, 0.55)}, nil, "target")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]PairedRow{}
	for _, r := range rep.Rows {
		by[r.Config] = r
	}
	if r := by[best+":precision=int8"]; r.VsFP32 == nil || math.Abs(*r.VsFP32-0.57) > 1e-9 || !r.WorseThanFP32 || r.Pareto {
		t.Errorf("int8 quality point: %+v, want 0.57 worse than fp32, off the frontier", r)
	}
	if r := by[fast+":precision=int8"]; r.VsFP32 == nil || r.WorseThanFP32 || !r.Pareto {
		t.Errorf("int8 fast point: %+v, want no cost and Pareto", r)
	}
	if !by[best].Pareto || by[best].VsFP32 != nil {
		t.Errorf("fp32 quality point: %+v, want Pareto again (its int8 twin left) and no twin figures", by[best])
	}
	chosen, _ := rep.Choose()
	picks := map[string]string{}
	for _, c := range chosen {
		picks[c.Name] = c.Row.Config
	}
	if picks["fast"] != fast+":precision=int8" || picks["balanced"] != mid || picks["quality"] != best {
		t.Errorf("tune picks %v", picks)
	}
	var md strings.Builder
	if err := rep.Markdown(&md); err != nil || !strings.Contains(md.String(), "+0.57 FID against its fp32 twin, measurably worse") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
