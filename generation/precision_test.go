package generation

import (
	"errors"
	"slices"
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
		{"unknown", base, "bf16", req(ModeTarget), "precision", []string{`"bf16"`, "unknown", "fp32, int8, fp16"}},
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

// A request names its precision; the catalog's is the default of requests that name none, and
// a server's --precisions bounds what they may name (the default always among them).
func TestRequestPrecision(t *testing.T) {
	_, cat := TestModels()
	cat.Target, cat.Draft = withInt8(cat.Target), withInt8(cat.Draft)
	req := func(precision string) Request {
		return Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1), Mode: ModeSpec, Precision: precision}}
	}
	for _, c := range []struct{ def, asked, want string }{
		{"", "", mar.FP32}, {"", mar.Int8, mar.Int8}, {mar.Int8, "", mar.Int8}, {mar.Int8, mar.FP32, mar.FP32},
	} {
		cat.Precision = c.def
		plan, err := ValidateRequest(req(c.asked), cat)
		if err != nil || plan.Precision != c.want {
			t.Errorf("default %q, asked %q: precision %q, %v; want %s", c.def, c.asked, plan.Precision, err, c.want)
		}
	}

	cat.Precision, cat.Precisions = mar.FP32, []string{mar.FP32}
	_, err := ValidateRequest(req(mar.Int8), cat)
	if Field(err) != "precision" || !strings.Contains(err.Error(), "does not serve int8") || !strings.Contains(err.Error(), "omit it, or fp32") {
		t.Errorf("int8 where --precisions is fp32: got %v, want a precision field error allowing fp32", err)
	}
	if _, err := ValidateRequest(req(mar.FP32), cat); err != nil {
		t.Errorf("fp32 where --precisions is fp32: %v", err)
	}
	if got := cat.PackPrecisions(cat.Target); !slices.Equal(got, []string{mar.FP32}) {
		t.Errorf("PackPrecisions under --precisions fp32 = %v", got)
	}
	cat.Precisions = nil
	if got := cat.PackPrecisions(cat.Target); !slices.Equal(got, []string{mar.FP32, mar.Int8}) {
		t.Errorf("PackPrecisions of a pack with int8 graphs = %v", got)
	}
	if _, c := TestModels(); !slices.Equal(c.PackPrecisions(c.Target), []string{mar.FP32}) {
		t.Errorf("PackPrecisions of a pack without int8 graphs = %v", c.PackPrecisions(c.Target))
	}
}

func TestParsePrecisions(t *testing.T) {
	for _, c := range []struct {
		list, def string
		want      []string
		err       string
	}{
		{"", "", nil, ""},
		{"fp32, int8,fp32", "int8", []string{mar.FP32, mar.Int8}, ""},
		{"fp32", "", []string{mar.FP32}, ""},
		{"int8", "fp32", nil, "leaves out fp32"},
		{"bf16", "", nil, `"bf16" unknown`},
		{"fp32,fp16", "", []string{mar.FP32, mar.FP16}, ""},
	} {
		got, err := ParsePrecisions(c.list, c.def)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParsePrecisions(%q, %q) = %v, %v; want an error with %q", c.list, c.def, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParsePrecisions(%q, %q) = %v, %v; want %v", c.list, c.def, got, err, c.want)
		}
	}
}

// A preset measured at int8 brings its precision to a request that names none, on a CPU
// catalog that serves it and a pack with the graphs; anywhere else the request runs at the
// catalog's default, and a request's own precision wins over the preset's.
func TestPresetPrecision(t *testing.T) {
	pre, err := PresetFromRunConfig("target:num_iter=3:steps=10:sampler=ddim:precision=int8")
	if err != nil || pre.Precision != mar.Int8 {
		t.Fatalf("PresetFromRunConfig: %+v, %v", pre, err)
	}
	if d := DescribePreset(pre); !strings.HasSuffix(d, ", int8 weights on a CPU") {
		t.Errorf("DescribePreset = %q, want it to name int8", d)
	}
	if p, _ := PresetFromRunConfig("target:num_iter=3:precision=fp32"); p.Precision != "" {
		t.Errorf("precision=fp32 gives preset precision %q, want none (fp32 is every preset's default)", p.Precision)
	}
	_, base := TestModels()
	set := *base.Target.Settings
	set.Presets = map[string]Preset{"quick": pre}
	man := withInt8(base.Target)
	man.Settings = &set
	cat := base
	cat.Target, cat.Draft = man, withInt8(base.Draft)
	req := func(precision string) Request {
		return Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1), Preset: "quick", Precision: precision}}
	}
	noInt8 := cat
	noInt8.Target = &mar.Manifest{}
	*noInt8.Target = *base.Target
	noInt8.Target.Settings = &set
	for _, c := range []struct {
		name  string
		tweak func(*Catalog)
		asked string
		want  string
	}{
		{"cpu", func(*Catalog) {}, "", mar.Int8},
		{"provider unset (tests, offline runs)", func(c *Catalog) { c.Provider = "" }, "", mar.Int8},
		{"request names fp32", func(*Catalog) {}, mar.FP32, mar.FP32},
		{"cuda: not measured there", func(c *Catalog) { c.Provider = "cuda" }, "", mar.FP32},
		{"server serves fp32 only", func(c *Catalog) { c.Precisions = []string{mar.FP32} }, "", mar.FP32},
		{"pack without int8 graphs", func(c *Catalog) { *c = noInt8 }, "", mar.FP32},
	} {
		k := cat
		c.tweak(&k)
		plan, err := ValidateRequest(req(c.asked), k)
		if err != nil || plan.Precision != c.want {
			t.Errorf("%s: precision %q, %v; want %s", c.name, plan.Precision, err, c.want)
		}
	}
	bad := set
	bad.Presets = map[string]Preset{"quick": {Mode: ModeTarget, Precision: "bf16", About: "x", Provenance: "chosen: x"}}
	m := *base.Target
	m.Settings = &bad
	if err := CheckSettings(&m); err == nil || !strings.Contains(err.Error(), `settings preset quick: precision "bf16" unknown`) {
		t.Errorf("a preset with precision bf16: %v", err)
	}
}

// withFP16 returns a copy of man that lists fp16 graphs, as scripts/packs/half_pack.py leaves it.
func withFP16(man *mar.Manifest) *mar.Manifest {
	m := *man
	m.Precisions = map[string]mar.PrecisionSpec{mar.FP16: {Transformer: "transformer.fp16.onnx", Head: "head.fp16.onnx"}}
	return &m
}

// fp16 runs on the CUDA provider only: on a CPU catalog a request (or the default) naming it is
// a FieldError on precision saying so and naming the CPU's precisions, even where the pack has
// the graphs; on CUDA a pack without them is named with the tool that makes them; presets
// measured at fp16 bring it on CUDA only, and the CPU does not list it.
func TestPrecisionFP16(t *testing.T) {
	_, base := TestModels()
	half := base
	half.Target, half.Draft = withFP16(base.Target), withFP16(base.Draft)
	cuda := half
	cuda.Provider = "cuda"
	noGraphs := base
	noGraphs.Provider = "cuda"
	req := func(precision string) Request {
		return Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1), Mode: ModeTarget, Precision: precision}}
	}
	for _, c := range []struct {
		name string
		cat  Catalog
		want []string
	}{
		{"cpu", half, []string{"CUDA provider", "--device cuda", "fp32 or int8"}},
		{"provider unset (the CPU)", func() Catalog { c := half; c.Provider = ""; return c }(), []string{"CUDA provider"}},
		{"cuda, pack without fp16 graphs", noGraphs, []string{"pack target (analytic-target) has no fp16 graphs", "scripts/packs/half_pack.py PACK"}},
	} {
		_, err := ValidateRequest(req(mar.FP16), c.cat)
		if Field(err) != "precision" || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want a FieldError on precision", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
	def := half
	def.Precision = mar.FP16
	if _, err := ValidateRequest(req(""), def); Field(err) != "precision" {
		t.Errorf("default fp16 on the CPU: %v, want a FieldError on precision", err)
	}
	plan, err := ValidateRequest(req(mar.FP16), cuda)
	if err != nil || plan.Precision != mar.FP16 || !strings.Contains(plan.Params(), "precision=fp16") {
		t.Errorf("fp16 on cuda: plan %q, params %q, %v", plan.Precision, plan.Params(), err)
	}
	if got := half.PackPrecisions(half.Target); !slices.Equal(got, []string{mar.FP32}) {
		t.Errorf("PackPrecisions of an fp16 pack on the CPU = %v, want fp32 alone", got)
	}
	if got := cuda.PackPrecisions(cuda.Target); !slices.Equal(got, []string{mar.FP32, mar.FP16}) {
		t.Errorf("PackPrecisions of an fp16 pack on cuda = %v", got)
	}

	pre, err := PresetFromRunConfig("target:num_iter=3:precision=fp16")
	if err != nil || pre.Precision != mar.FP16 || !strings.HasSuffix(DescribePreset(pre), ", fp16 weights on CUDA") {
		t.Fatalf("PresetFromRunConfig: %+v, %v, %q", pre, err, DescribePreset(pre))
	}
	set := *base.Target.Settings
	set.Presets = map[string]Preset{"quick": pre}
	for _, c := range []struct {
		name string
		cat  Catalog
		want string
	}{{"cpu", half, mar.FP32}, {"cuda", cuda, mar.FP16}} {
		k := c.cat
		man := *k.Target
		man.Settings = &set
		k.Target = &man
		plan, err := ValidateRequest(Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1), Preset: "quick"}}, k)
		if err != nil || plan.Precision != c.want {
			t.Errorf("an fp16 preset on %s: precision %q, %v; want %s", c.name, plan.Precision, err, c.want)
		}
	}
}
