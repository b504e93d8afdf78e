package bench

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"

	"marspec/mar"
)

// cacheRun accumulates one configuration's timed generations.
type cacheRun struct {
	name                string
	cache               mar.CacheSettings
	wall                time.Duration
	plain, cached, head partTime
	images              int
}

// CacheCompare times target-only generation without the cache and with each of caches, the
// configurations taking turns round by round, in reverse every other round (so a load change on a shared machine hits all
// alike), and writes images/s, the speedup over no cache, and the shares of the plain
// transformer pass, the cached graph, the head and the rest (docs/cache.md, BENCHMARKS.md).
// Rounds 1..pf.Rounds are counted; with warm, a round 0 runs first and is not.
// progress (may be nil) gets one line per timed generation, for runs that take hours.
func CacheCompare(out, progress io.Writer, m *mar.Model, pf ProfileSettings, steps, threads int, caches []mar.CacheSettings, warm bool) error {
	if m.Cached == nil {
		return fmt.Errorf("pack %s has no cached transformer (scripts/packs/cached_transformer.py --pack DIR adds one)", m.Manifest.Name)
	}
	if pf.Images < 1 || pf.Rounds < 1 {
		return fmt.Errorf("--images and --rounds must be at least 1")
	}
	base := mar.Options{Seed: 1, CFG: pf.CFG, NumIter: pf.NumIter, Steps: steps, Batch: pf.Batch}
	if err := m.Validate(&base); err != nil {
		return err
	}
	runs := []*cacheRun{{name: "no cache"}}
	for _, c := range caches {
		o := base
		o.Cache = c
		if err := m.Validate(&o); err != nil {
			return err
		}
		runs = append(runs, &cacheRun{name: "cache " + c.String(), cache: c})
	}
	onnxTr, onnxHead := mar.Unmemoized(m.Transformer), m.Head
	defer func(tr mar.Transformer) { m.Transformer, m.Head, m.Cached.OnRun = tr, onnxHead, nil }(m.Transformer)
	classes := imageClasses(m, pf.Images)
	load0 := loadAvg()
	first := 1
	if warm {
		first = 0
	}
	for round := first; round <= pf.Rounds; round++ {
		order := runs
		if round%2 == 0 { // every other round in reverse: no configuration always runs first
			order = reversed(runs)
		}
		for _, r := range order {
			plain, cached, head := &partTime{}, &partTime{}, &partTime{}
			m.Transformer, m.Head = timedTransformer{onnxTr, plain}, timedHead{onnxHead, head}
			m.Cached.OnRun = func(d time.Duration) { cached.d += d; cached.calls++ }
			opt := base
			opt.Cache = r.cache
			start := time.Now()
			if _, err := m.Generate(classes, opt); err != nil {
				return err
			}
			if progress != nil {
				fmt.Fprintf(progress, "bench --cache: round %d, %s: %.1f s\n", round, r.name, time.Since(start).Seconds())
			}
			if round == 0 {
				continue
			}
			r.wall += time.Since(start)
			r.images += len(classes)
			for _, p := range [][2]*partTime{{&r.plain, plain}, {&r.cached, cached}, {&r.head, head}} {
				p[0].d, p[0].calls = p[0].d+p[1].d, p[0].calls+p[1].calls
			}
		}
	}
	load1 := loadAvg()
	fmt.Fprintf(out, "# marspec bench --cache: %s/%s, %d CPUs, provider cpu, intra-op threads %d, load average %s at start, %s at end\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), threads, load0, load1)
	fmt.Fprintf(out, "# %s target-only: %d images, batch %d, num-iter %d, steps %d, cfg %g; %d rounds, configurations in turns\n\n",
		m.Manifest.Name, pf.Images, base.Batch, base.NumIter, base.Steps, base.CFG, pf.Rounds)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "configuration\timages/s\tspeedup\ttransformer.onnx\tcached graph\thead\trest\tpasses (plain+cached)\t")
	for _, r := range runs {
		wall := r.wall.Seconds()
		share := func(d time.Duration) string { return fmt.Sprintf("%.1f%%", 100*d.Seconds()/wall) }
		rest := r.wall - r.plain.d - r.cached.d - r.head.d
		fmt.Fprintf(w, "%s\t%.4f\t%.2fx\t%s\t%s\t%s\t%s\t%d+%d\t\n", r.name, float64(r.images)/wall,
			runs[0].wall.Seconds()/wall, share(r.plain.d), share(r.cached.d), share(r.head.d), share(rest),
			r.plain.calls/pf.Rounds, r.cached.calls/pf.Rounds)
	}
	return w.Flush()
}

func reversed[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}
