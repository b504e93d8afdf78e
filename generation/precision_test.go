package generation

import (
	"errors"
	"strings"
	"testing"

	"marspec/api"
	"marspec/mar"
)

// withInt8 returns a copy of man that lists int8 graphs, as scripts/packs/quantize_pack.py leaves it.
func withInt8(man *mar.Manifest) *mar.Manifest {
	m := *man
	m.Precisions = map[string]mar.PrecisionSpec{mar.Int8: {Transformer: "transformer.int8.onnx", Head: "head.int8.onnx"}}
	return &m
}

// A precision is checked like every setting: an unknown one names the allowed ones, a pack
// without its graphs is named with the script that adds them, and each pack the plan runs is
// checked (the draft too in spec mode).
func TestPrecisionRejects(t *testing.T) {
	_, base := TestModels()
	req := func(mode string) Request {
		return Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1), Mode: mode}}
	}
	targetOnly := base
	targetOnly.Target = withInt8(base.Target)
	cases := []struct {
		name      string
		cat       Catalog
		precision string
		req       Request
		field     string
		want      []string // in the message
	}{
		{"unknown", base, "bf16", req(ModeTarget), "precision", []string{`"bf16"`, "unknown", "fp32, int8"}},
		{"target lacks int8", base, "int8", req(ModeTarget), "precision", []string{"pack target (analytic-target) has no int8 graphs", "scripts/packs/quantize_pack.py"}},
		{"draft mode, draft lacks int8", targetOnly, "int8", req(ModeDraft), "precision", []string{"pack draft (analytic-draft)"}},
		{"spec, draft lacks int8", targetOnly, "int8", req(ModeSpec), "precision", []string{"pack draft (analytic-draft)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cat := c.cat
			cat.Precision = c.precision
			_, err := ValidateRequest(c.req, cat)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want a FieldError for %s", err, c.field)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}

	_, cat := TestModelsWithExit()
	cat.Target, cat.Precision = withInt8(cat.Target), mar.Int8
	r := req(ModeSpec)
	r.EarlyExit = true
	if _, err := ValidateRequest(r, cat); Field(err) != "draft" || !strings.Contains(err.Error(), "no int8 variant") {
		t.Errorf("draft exit at int8: got %v, want a draft field error naming the missing int8 exit graphs", err)
	}
}

// A pack with int8 graphs runs at int8; the plan says so in its provenance and settings, and a
// plain fp32 plan's text is unchanged (no precision= in it).
func TestPrecisionInProvenance(t *testing.T) {
	_, cat := TestModels()
	cat.Target, cat.Draft = withInt8(cat.Target), withInt8(cat.Draft)
	req := Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1), Mode: ModeSpec}}
	for _, c := range []struct {
		precision, want string
	}{{"", mar.FP32}, {mar.FP32, mar.FP32}, {mar.Int8, mar.Int8}} {
		cat.Precision = c.precision
		plan, err := ValidateRequest(req, cat)
		if err != nil {
			t.Fatalf("precision %q: %v", c.precision, err)
		}
		stamped := strings.Contains(plan.Params(), "precision=") || plan.Settings().Precision != ""
		if plan.Precision != c.want || stamped != (c.want == mar.Int8) {
			t.Errorf("precision %q: plan %q, params %q, settings %q", c.precision, plan.Precision, plan.Params(), plan.Settings().Precision)
		}
		if c.want == mar.Int8 && (!strings.Contains(plan.Params(), "precision=int8") || plan.Settings().Precision != mar.Int8) {
			t.Errorf("int8: params %q, settings precision %q", plan.Params(), plan.Settings().Precision)
		}
	}
}
