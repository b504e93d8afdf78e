package generation

import (
	"fmt"
	"strconv"

	"marspec/api"
	"marspec/mar"
)

// cacheSettings turns the request's cache object into mar.CacheSettings for pack (its
// manifest man), or a field error naming what is allowed. Spec mode refuses the cache: its
// lossless modes promise the target's own law, and a lazy step's z is an approximation of
// the target's (docs/cache.md, "Spec mode").
func cacheSettings(req *api.CacheRequest, mode, pack, precision string, man *mar.Manifest) (mar.CacheSettings, error) {
	var c mar.CacheSettings
	if req == nil {
		return c, nil
	}
	switch {
	case mode == ModeSpec:
		return c, fieldErr("cache", "{...}", "omit it, or use mode target or draft",
			"speculative decoding verifies against the target's exact conditionals; a cached target is an approximation of them")
	case man.Cache == nil:
		return c, fieldErr("cache", "{...}", "omit it, or a pack with a cached transformer (scripts/packs/cached_transformer.py --pack DIR)",
			"pack "+pack+" has no transformer_cached.onnx")
	case !man.HasCachedAt(precision):
		return c, fieldErr("cache", "{...}", "omit it, precision "+mar.FP32+", or a pack whose "+precision+" graphs include the cached transformer ("+mar.PrecisionHint(precision)+")",
			"pack "+pack+" has no "+precision+" variant of its cached transformer")
	}
	L := man.SeqLen()
	c = mar.CacheSettings{On: true, FullSteps: mar.DefaultCacheFullSteps, RefreshEvery: mar.DefaultCacheRefreshEvery,
		Recompute: mar.DefaultCacheRecompute(L), ReuseCFG: true}
	if v := req.FullSteps; v != nil {
		if *v < 1 {
			return c, fieldErr("cache.full_steps", *v, "1 or more AR steps (the first step has no cache to read)", "")
		}
		c.FullSteps = *v
	}
	if v := req.RefreshEvery; v != nil {
		if *v < 1 {
			return c, fieldErr("cache.refresh_every", *v, "1 or more (1 = a full pass every step, no lazy step)", "")
		}
		c.RefreshEvery = *v
	}
	if v := req.Recompute; v != nil {
		if *v < 0 || *v > L {
			return c, fieldErr("cache.recompute", *v, fmt.Sprintf("0 to %d tokens", L), "")
		}
		c.Recompute = *v
	}
	if v := req.CFGReuse; v != nil {
		c.ReuseCFG = *v
	}
	return c, nil
}

// CacheFlags are the command line's cache settings (`--cache on` and its knobs), for
// generate, bench, eval and frontier alike.
type CacheFlags struct {
	Switch                             string // on or off
	FullSteps, RefreshEvery, Recompute int
	CFGReuse                           string // on or off
}

// CacheFlagNames are the flags CacheFlags reads, as `set` names them.
var CacheFlagNames = []string{"cache", "cache-full-steps", "cache-refresh-every", "cache-recompute", "cache-cfg-reuse"}

// Request puts the flags given (set) into req.Cache: `--cache on` turns the cache on, a knob
// alone without it is refused (it would do nothing).
func (f CacheFlags) Request(req *Request, set map[string]bool) error {
	on := false
	if set["cache"] {
		v, err := ParseSwitch("cache", f.Switch)
		if err != nil {
			return err
		}
		on = v
	}
	knob := ""
	for _, name := range CacheFlagNames[1:] {
		if set[name] {
			knob = name
		}
	}
	if !on {
		if knob != "" {
			return &FieldError{Field: knob, Value: "", Allowed: "omit it, or add --cache on", Reason: "the cache is off"}
		}
		return nil
	}
	c := &api.CacheRequest{}
	if set["cache-full-steps"] {
		c.FullSteps = &f.FullSteps
	}
	if set["cache-refresh-every"] {
		c.RefreshEvery = &f.RefreshEvery
	}
	if set["cache-recompute"] {
		c.Recompute = &f.Recompute
	}
	if set["cache-cfg-reuse"] {
		v, err := ParseSwitch("cache-cfg-reuse", f.CFGReuse)
		if err != nil {
			return err
		}
		c.CFGReuse = &v
	}
	req.Cache = c
	return nil
}

// CacheSettingsFor is the cache the flags ask for on pack (its manifest man) in target mode
// at fp32, defaults filled in, as a request's would be: what bench --cache compares.
func CacheSettingsFor(f CacheFlags, set map[string]bool, man *mar.Manifest, pack string) (mar.CacheSettings, error) {
	on := map[string]bool{"cache": true}
	for k, v := range set {
		on[k] = v
	}
	f.Switch = "on"
	var req Request
	if err := f.Request(&req, on); err != nil {
		return mar.CacheSettings{}, err
	}
	return cacheSettings(req.Cache, ModeTarget, pack, mar.FP32, man)
}

// setCacheKey reads a run configuration's cache key (cache=on|off, or a knob, which turns the
// cache on): its part of the configuration's name.
func setCacheKey(req *Request, k, v string) (named string, err error) {
	if k == "cache" {
		on, err := ParseSwitch(k, v)
		if err != nil || !on {
			req.Cache = nil
			return "", err
		}
		if req.Cache == nil {
			req.Cache = &api.CacheRequest{}
		}
		return "cache", nil
	}
	if req.Cache == nil {
		req.Cache = &api.CacheRequest{}
	}
	if k == "cache_cfg_reuse" {
		reuse, err := ParseSwitch(k, v)
		req.Cache.CFGReuse = &reuse
		if reuse {
			return "", err
		}
		return "nocfgreuse", err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return "", fieldErr(k, strconv.Quote(v), "a whole number", "not a whole number")
	}
	switch k {
	case "cache_full_steps":
		req.Cache.FullSteps = &n
		return "cfull" + v, nil
	case "cache_refresh_every":
		req.Cache.RefreshEvery = &n
		return "crefresh" + v, nil
	case "cache_recompute":
		req.Cache.Recompute = &n
		return "crecompute" + v, nil
	}
	return "", fieldErr(k, strconv.Quote(v), RunConfigKeysTarget, "unknown")
}
