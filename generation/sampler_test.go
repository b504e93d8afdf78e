package generation

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"marspec/api"
)

// Sampler settings are checked with field errors that name what is allowed.
func TestValidateSampler(t *testing.T) {
	_, cat := TestModels()
	checkFieldErrors(t, cat, []fieldCase{
		{"unknown sampler", "sampler", "dpmpp-2m-sde", api.GenerateRequest{Mode: ModeTarget, Sampler: "euler"}},
		{"eta above 1", "eta", "0 to 1", api.GenerateRequest{Mode: ModeTarget, Sampler: "ddim", Eta: f64(1.5)}},
		{"eta negative", "eta", "0 to 1", api.GenerateRequest{Mode: ModeTarget, Sampler: "ddim", Eta: f64(-0.1)}},
		{"eta without ddim", "eta", "ddim", api.GenerateRequest{Mode: ModeTarget, Sampler: "dpmpp-2m", Eta: f64(0.5)}},
		{"eta with default sampler", "eta", "ddim", api.GenerateRequest{Mode: ModeTarget, Eta: f64(0.5)}},
		{"spec refuses dpmpp-2m", "sampler", "ddpm", api.GenerateRequest{Mode: ModeSpec, Sampler: "dpmpp-2m"}},
		{"spec refuses dpmpp-2m-sde", "sampler", "ddpm", api.GenerateRequest{Mode: ModeSpec, Sampler: "dpmpp-2m-sde"}},
		{"spec refuses ddim eta 0", "sampler", "ddpm", api.GenerateRequest{Mode: ModeSpec, Sampler: "ddim", Eta: f64(0)}},
		{"spec refuses ddim (default eta 0)", "sampler", "ddpm", api.GenerateRequest{Mode: ModeSpec, Sampler: "ddim"}},
	})
	for _, ok := range []api.GenerateRequest{
		{Mode: ModeTarget, Sampler: "ddim", Eta: f64(0)},
		{Mode: ModeTarget, Sampler: "ddim", Eta: f64(1)},
		{Mode: ModeTarget, Sampler: "dpmpp-2m"},
		{Mode: ModeDraft, Sampler: "dpmpp-2m-sde"},
		{Mode: ModeSpec, Sampler: "ddpm"},
	} {
		ok.Class, ok.Seed = api.Classes{"0"}, u64(1)
		if _, err := Validate(ok, cat); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// Non-default samplers appear in the provenance text and settings; the default leaves the
// text as it was. Each sampler runs end to end on the analytic models, deterministically,
// and changes the image.
func TestSamplerRunsAndIsRecorded(t *testing.T) {
	models, cat := TestModels()
	run := func(sampler string, eta *float64) ([]byte, Plan) {
		p, err := Validate(api.GenerateRequest{Class: api.Classes{"1"}, Seed: u64(9), Mode: ModeTarget, Sampler: sampler, Eta: eta}, cat)
		if err != nil {
			t.Fatal(err)
		}
		imgs, err := Run(t.Context(), p, models, 0)
		if err != nil {
			t.Fatal(err)
		}
		return imgs[0].Pixels, p
	}
	def, p := run("", nil)
	if strings.Contains(p.Params(), "sampler") || p.Settings().Sampler != "" {
		t.Errorf("default request mentions a sampler: %q", p.Params())
	}
	for _, c := range []struct {
		s   string
		eta *float64
	}{{"ddim", f64(0)}, {"ddim", f64(0.5)}, {"dpmpp-2m", nil}, {"dpmpp-2m-sde", nil}} {
		a, p := run(c.s, c.eta)
		b, _ := run(c.s, c.eta)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: same seed gave different pixels", c.s)
		}
		if bytes.Equal(a, def) {
			t.Errorf("%s: pixels equal ddpm's: the sampler was not used", c.s)
		}
		if !strings.Contains(p.Params(), "sampler="+c.s) || p.Settings().Sampler != c.s {
			t.Errorf("%s: params %q / settings %q do not record it", c.s, p.Params(), p.Settings().Sampler)
		}
	}
}

// fieldCase is a request (class 0, seed 1 filled in) that must be refused on field, with
// allowed in the error's list of what is allowed.
type fieldCase struct {
	name, field, allowed string
	req                  api.GenerateRequest
}

func checkFieldErrors(t *testing.T, cat Catalog, cases []fieldCase) {
	t.Helper()
	for _, c := range cases {
		c.req.Class, c.req.Seed = api.Classes{"0"}, u64(1)
		_, err := Validate(c.req, cat)
		var fe *FieldError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Allowed, c.allowed) {
			t.Errorf("%s: got %v, want a FieldError on %q allowing %q", c.name, err, c.field, c.allowed)
		}
	}
}
