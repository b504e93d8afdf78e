package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"marspec/bench"
	"marspec/mar"
)

// comparePrecisions opens the target pack once per precision and runs bench.ComparePrecisions.
func comparePrecisions(rt *runtimeFlags, target, precisions, forward, head, gen string, ps bench.PrecisionSettings) error {
	var err error
	if ps.Batches, err = parseInts("--forward-batches", forward); err != nil {
		return err
	}
	if ps.HeadRows, err = parseInts("--head-rows", head); err != nil {
		return err
	}
	if ps.GenBatches, err = parseInts("--gen-batches", gen); err != nil {
		return err
	}
	var models []bench.Named
	for _, p := range splitList(precisions) {
		if _, err := mar.ParsePrecision(p); err != nil {
			return fmt.Errorf("--precisions: %v", err)
		}
		one := *rt
		one.precision = p
		m, err := one.open(target)
		if err != nil {
			return err
		}
		models = append(models, bench.Named{Name: p, Model: m})
	}
	fmt.Printf("# marspec bench --precisions %s: %s/%s, %d CPUs, provider %s, intra-op threads %d; pack %s (%s)\n\n",
		precisions, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), rt.provider, rt.threads, target, models[0].Model.Manifest.Name)
	return bench.ComparePrecisions(os.Stdout, models, ps)
}

// parseInts reads a comma-separated list of positive integers given to flag.
func parseInts(flag, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer (want a list such as 1,8,32)", flag, f)
		}
		out = append(out, v)
	}
	return out, nil
}
