package bench

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"marspec/mar"
	"marspec/mar/analytic"
)

// The sampler profile counts each sampler's head calls (ddpm: steps per AR step, two rows
// halves in one call under guidance; distilled: K per AR step) and names a bad entry.
func TestProfileSamplers(t *testing.T) {
	m := analytic.WithDistilled(analytic.New(analytic.Params{Name: "a", SeqLen: 4, TokenDim: 2, Base: []float64{0, 0.1, 0.2, 0.3},
		Scale: 0.1, Steps: 10, Classes: 2}), 4)
	var out bytes.Buffer
	pf := ProfileSettings{Images: 2, NumIter: 2, Rounds: 1, CFG: 3}
	if err := ProfileSamplers(&out, m, pf, "ddpm:10,distilled:4,distilled:1", 1, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`ddpm:10 .* 20\s+2\s*$`, `distilled:4 .* 8\s+2\s*$`, `distilled:1 .* 2\s+2\s*$`} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out.String()) {
			t.Errorf("no line matching %q in\n%s", want, out.String())
		}
	}
	for _, bad := range []struct{ list, want string }{
		{"ddpm", "sampler:steps"}, {"euler:4", "unknown"}, {"distilled:3", "steps 3"}, {"ddim:x", "not a whole number"},
	} {
		err := ProfileSamplers(&bytes.Buffer{}, m, pf, bad.list, 1, false)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--samplers %s: got %v, want an error naming %q", bad.list, err, bad.want)
		}
	}
}

// With --opening each sampler runs without the memo (every AR step a transformer pass) and
// with it warm (the first step served from memory: one pass fewer per generation).
func TestProfileSamplersOpening(t *testing.T) {
	m := analytic.WithDistilled(analytic.New(analytic.Params{Name: "a", SeqLen: 4, TokenDim: 2, Base: []float64{0, 0.1, 0.2, 0.3},
		Scale: 0.1, Steps: 10, Classes: 2}), 4)
	pf := ProfileSettings{Images: 2, NumIter: 3, Rounds: 2, CFG: 3}
	if err := ProfileSamplers(&bytes.Buffer{}, m, pf, "distilled:1", 1, true); err == nil || !strings.Contains(err.Error(), "no opening memo") {
		t.Errorf("a model without the memo: %v", err)
	}
	m.Transformer = mar.NewOpeningMemo(m.Transformer, 1<<20)
	var out bytes.Buffer
	if err := ProfileSamplers(&out, m, pf, "distilled:1", 1, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`distilled:1, no opening memo .* 3\s+3\s*$`, `^\s*distilled:1 .* 3\s+2\s*$`} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out.String()) {
			t.Errorf("no line matching %q in\n%s", want, out.String())
		}
	}
}
