package generation

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/mar"
)

// An image costs a pass per AR step and a head call per token and diffusion step, both twice
// when guided; annealing counts each AR step's own steps.
func TestCostsOfAnImage(t *testing.T) {
	c := Costs{Pass: time.Second, Head: 10 * time.Millisecond, Precision: mar.FP32}
	opt := mar.Options{CFG: 1, NumIter: 256, Steps: 100}
	if got, want := c.Image(opt, 256), 256*time.Second+256*100*10*time.Millisecond; got != want {
		t.Errorf("one token per step: %v, want %v", got, want)
	}
	opt.CFG = 2.9
	if got, want := c.Image(opt, 256), 2*(256*time.Second+256*100*10*time.Millisecond); got != want {
		t.Errorf("guided, timed unguided: %v, want %v", got, want)
	}
	g := c
	g.Guided = true
	if got, want := g.Image(opt, 256), 256*time.Second+256*100*10*time.Millisecond; got != want {
		t.Errorf("guided, timed guided: %v, want %v", got, want)
	}
	opt.CFG = 1
	if got, want := g.Image(opt, 256), (256*time.Second+256*100*10*time.Millisecond)/2; got != want {
		t.Errorf("unguided, timed guided: %v, want %v", got, want)
	}
	// two AR steps of 3 tokens, 10 then 4 diffusion steps
	opt = mar.Options{CFG: 1, NumIter: 2, Steps: 10, StepsLate: 4}
	sizes := mar.StepSizes(6, 2)
	want := 2*time.Second + time.Duration(sizes[0]*10+sizes[1]*4)*10*time.Millisecond
	if got := c.Image(opt, 6); got != want {
		t.Errorf("annealed: %v, want %v", got, want)
	}
}

// A run slower than the pack's presets hears what it costs and which presets are faster, the
// cheapest first, each with where its settings come from; the default run names none faster
// than itself.
func TestDescribeCostsNamesFasterPresets(t *testing.T) {
	models, cat := TestModels()
	seed, one := uint64(1), 0
	slow, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Seed: &seed, Mode: ModeTarget, NumIter: &one}, cat)
	if err != nil {
		t.Fatal(err)
	}
	c := Costs{Pass: 2 * time.Second, Head: 20 * time.Millisecond, Precision: mar.FP32}
	var out bytes.Buffer
	if err := DescribeCosts(&out, "", c, cat, &slow, 1); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// 6 AR steps of 2 s and 6 tokens x 10 steps of 20 ms
	if want := "cost here: about 13 s per image for this run: an estimate from one unguided transformer pass (2.0 s) and head call (20 ms) timed at open, fp32, 1 thread"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	var faster []string
	for _, l := range lines[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(l, "  faster: --preset "), " ")
		faster = append(faster, strings.TrimSuffix(name, ","))
		if !strings.Contains(l, " per image: ") || !strings.Contains(l, " [measured: ") {
			t.Errorf("line %q lacks the preset's settings or provenance", l)
		}
	}
	// fast falls back to balanced on a pack without a distilled head: named once, as balanced
	if strings.Join(faster, ",") != "balanced,quality" {
		t.Errorf("faster presets %v, want balanced then quality:\n%s", faster, out.String())
	}
	out.Reset()
	if err := TellCosts(&out, "  ", models["target"], mar.FP32, cat, nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "  cost here: about ") || !strings.Contains(got, " for the default, preset ") || strings.Contains(got, "faster") {
		t.Errorf("default request: %q", got)
	}
}
