package bench

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"marspec/mar/analytic"
)

// The sampler profile counts each sampler's head calls (ddpm: steps per AR step, two rows
// halves in one call under guidance; distilled: K per AR step) and names a bad entry.
func TestProfileSamplers(t *testing.T) {
	m := analytic.WithDistilled(analytic.New(analytic.Params{Name: "a", SeqLen: 4, TokenDim: 2, Base: []float64{0, 0.1, 0.2, 0.3},
		Scale: 0.1, Steps: 10, Classes: 2}), 4)
	var out bytes.Buffer
	pf := ProfileSettings{Images: 2, NumIter: 2, Rounds: 1, CFG: 3}
	if err := ProfileSamplers(&out, m, pf, "ddpm:10,distilled:4,distilled:1", 1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`ddpm:10 .* 20\s*$`, `distilled:4 .* 8\s*$`, `distilled:1 .* 2\s*$`} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out.String()) {
			t.Errorf("no line matching %q in\n%s", want, out.String())
		}
	}
	for _, bad := range []struct{ list, want string }{
		{"ddpm", "sampler:steps"}, {"euler:4", "unknown"}, {"distilled:3", "steps 3"}, {"ddim:x", "not a whole number"},
	} {
		err := ProfileSamplers(&bytes.Buffer{}, m, pf, bad.list, 1)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--samplers %s: got %v, want an error naming %q", bad.list, err, bad.want)
		}
	}
}
