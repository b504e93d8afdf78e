package generation

import (
	"errors"
	"strings"
	"testing"

	"marspec/api"
	"marspec/mar"
)

func boolp(v bool) *bool { return &v }

// The cache is off unless asked for; asked for, it takes the defaults and the knobs given,
// and every refusal is a field error naming the field and what is allowed.
func TestCacheRequest(t *testing.T) {
	_, cat := TestModels()
	req := func(c *api.CacheRequest, mode string) api.GenerateRequest {
		return api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1), Mode: mode, Cache: c}
	}
	p, err := Validate(req(nil, ModeTarget), cat)
	if err != nil || p.Options.Cache.On || p.Settings().Cache != "" || strings.Contains(p.Params(), "cache") {
		t.Fatalf("no cache asked: %+v, %v", p.Options.Cache, err)
	}
	// a pack without the graph: 400 naming the pack
	_, err = Validate(req(&api.CacheRequest{}, ModeTarget), cat)
	if Field(err) != "cache" || !strings.Contains(err.Error(), "pack target has no transformer_cached.onnx") {
		t.Fatalf("pack without the cached graph: %v", err)
	}
	man := *cat.Target
	man.Cache = &mar.CacheSpec{File: "transformer_cached.onnx", Format: mar.CacheFormat, EncoderBlocks: 1, DecoderBlocks: 1}
	cat.Target = &man
	p, err = Validate(req(&api.CacheRequest{}, ModeTarget), cat)
	want := mar.CacheSettings{On: true, FullSteps: 5, RefreshEvery: 9, Recompute: 0, ReuseCFG: true} // L = 6: 6/16 = 0
	if err != nil || p.Options.Cache != want {
		t.Fatalf("defaults: %+v, %v; want %+v", p.Options.Cache, err, want)
	}
	if s := p.Settings().Cache; s != "full_steps 5, refresh_every 9, recompute 0, cfg_reuse on" {
		t.Fatalf("job settings show %q", s)
	}
	if !strings.Contains(p.Params(), "cache=full_steps:5,refresh_every:9,recompute:0,cfg_reuse:true") {
		t.Fatalf("PNG parameters %q lack the cache", p.Params())
	}
	p, err = Validate(req(&api.CacheRequest{FullSteps: i(2), RefreshEvery: i(3), Recompute: i(4), CFGReuse: boolp(false)}, ModeTarget), cat)
	if want := (mar.CacheSettings{On: true, FullSteps: 2, RefreshEvery: 3, Recompute: 4}); err != nil || p.Options.Cache != want {
		t.Fatalf("knobs: %+v, %v; want %+v", p.Options.Cache, err, want)
	}
	// at int8 the cached graph must have its int8 variant (quantize_pack.py adds it)
	cat.Target, cat.Precision = withInt8(&man), mar.Int8
	_, err = Validate(req(&api.CacheRequest{}, ModeTarget), cat)
	if Field(err) != "cache" || !strings.Contains(err.Error(), "pack target has no int8 variant of its cached transformer") ||
		!strings.Contains(err.Error(), "quantize_pack.py") {
		t.Fatalf("int8 without the cached graph's variant: %v", err)
	}
	int8Man := *cat.Target
	spec := int8Man.Precisions[mar.Int8]
	spec.Cached = "transformer_cached.int8.onnx"
	int8Man.Precisions = map[string]mar.PrecisionSpec{mar.Int8: spec}
	cat.Target = &int8Man
	if p, err = Validate(req(&api.CacheRequest{}, ModeTarget), cat); err != nil || !p.Options.Cache.On || p.Precision != mar.Int8 {
		t.Fatalf("int8 with the cached graph's variant: %+v at %q, %v; want the cache on at int8", p.Options.Cache, p.Precision, err)
	}
	cat.Target, cat.Precision = &man, ""
	for _, c := range []struct {
		field string
		cache api.CacheRequest
		mode  string
	}{
		{"cache.full_steps", api.CacheRequest{FullSteps: i(0)}, ModeTarget},
		{"cache.refresh_every", api.CacheRequest{RefreshEvery: i(0)}, ModeTarget},
		{"cache.recompute", api.CacheRequest{Recompute: i(7)}, ModeTarget},
		{"cache.recompute", api.CacheRequest{Recompute: i(-1)}, ModeTarget},
		{"cache", api.CacheRequest{}, ModeSpec},  // spec mode refuses it (docs/cache.md)
		{"cache", api.CacheRequest{}, ModeDraft}, // the draft pack has no cached graph
	} {
		_, err := Validate(req(&c.cache, c.mode), cat)
		var fe *FieldError
		if Field(err) != c.field || !errors.As(err, &fe) || fe.Allowed == "" {
			t.Errorf("%s %+v in mode %s: %v, want a field error on %s", c.field, c.cache, c.mode, err, c.field)
		}
	}
}

// The command line's --cache flags become the request's cache object; a knob without
// --cache on is refused rather than ignored.
func TestCacheFlags(t *testing.T) {
	var r Request
	f := CacheFlags{Switch: "on", RefreshEvery: 4, CFGReuse: "off"}
	if err := f.Request(&r, map[string]bool{"cache": true, "cache-refresh-every": true, "cache-cfg-reuse": true}); err != nil {
		t.Fatal(err)
	}
	if r.Cache == nil || *r.Cache.RefreshEvery != 4 || *r.Cache.CFGReuse || r.Cache.FullSteps != nil {
		t.Fatalf("flags gave %+v", r.Cache)
	}
	r = Request{}
	if err := f.Request(&r, map[string]bool{"cache-recompute": true}); Field(err) != "cache-recompute" {
		t.Fatalf("knob without --cache on: %v", err)
	}
	if err := (CacheFlags{Switch: "yes"}).Request(&r, map[string]bool{"cache": true}); Field(err) != "cache" {
		t.Fatalf("--cache yes: %v", err)
	}
}

// Scoring runs and the frontier name cached configurations as target:num_iter=16:cache=on.
func TestCacheRunConfig(t *testing.T) {
	_, cat := TestModels()
	man := *cat.Target
	man.Cache = &mar.CacheSpec{File: "transformer_cached.onnx", Format: mar.CacheFormat, EncoderBlocks: 1, DecoderBlocks: 1}
	cat.Target = &man
	rc, err := ParseRunConfig("target:num_iter=6:cache=on:cache_refresh_every=2:cache_recompute=0:cache_cfg_reuse=off", runBase(), cat)
	if err != nil {
		t.Fatal(err)
	}
	want := mar.CacheSettings{On: true, FullSteps: 5, RefreshEvery: 2, Recompute: 0}
	if rc.Plan.Options.Cache != want || rc.Name != "target-it6-cache-crefresh2-crecompute0-nocfgreuse" {
		t.Fatalf("got %+v named %q", rc.Plan.Options.Cache, rc.Name)
	}
	if rc, err := ParseRunConfig("target:cache=off", runBase(), cat); err != nil || rc.Plan.Options.Cache.On || rc.Name != "target" {
		t.Fatalf("cache=off: %+v %q %v", rc.Plan.Options.Cache, rc.Name, err)
	}
	if _, err := ParseRunConfig("spec:cache=on", runBase(), cat); err == nil {
		t.Fatal("spec configuration took the cache")
	}
}
