package main

import (
	"flag"

	"marspec/generation"
)

// addCacheFlags adds the cache's switch and knobs (generation.CacheFlags; docs/cache.md).
func addCacheFlags(fs *flag.FlagSet, c *generation.CacheFlags) {
	fs.StringVar(&c.Switch, "cache", "off", "caching across AR steps (LazyMAR-style, training-free; target/draft modes, packs with transformer_cached.onnx; int8 where quantize_pack.py gave it a variant): on or off")
	addCacheKnobFlags(fs, c)
}

// addCacheKnobFlags adds the cache's knobs alone (bench --cache has its own switch).
func addCacheKnobFlags(fs *flag.FlagSet, c *generation.CacheFlags) {
	fs.IntVar(&c.FullSteps, "cache-full-steps", 0, "with --cache on: the first AR steps that run a full pass (default 5)")
	fs.IntVar(&c.RefreshEvery, "cache-refresh-every", 0, "with --cache on: after them every k-th step runs a full pass (default 9; 1 = every step, the uncached images)")
	fs.IntVar(&c.Recompute, "cache-recompute", 0, "with --cache on: decoder tokens a lazy step recomputes beyond the new and predicted ones, stalest first (default L/16)")
	fs.StringVar(&c.CFGReuse, "cache-cfg-reuse", "on", "with --cache on: lazy steps run the class half only and reuse the CFG difference of the last full pass: on or off")
}

// flagsSet names the flags given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
