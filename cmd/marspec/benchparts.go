package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"marspec/bench"
	"marspec/mar"
	"marspec/onnxrt"
)

// runParts is `bench --parts`: the pack's open time, one generation timed per part and,
// with --gemm, the MatMul peak the parts are measured against. cacheFor, when set, gives the
// cache to generate with; it needs the pack's manifest, so it runs once the pack is open.
func runParts(rt *runtimeFlags, target string, pf bench.PartsSettings, cacheFor func(*mar.Manifest) (mar.CacheSettings, error),
	gemm string, asJSON bool) error {
	var m, k, n int
	if gemm != "" {
		if _, err := fmt.Sscanf(gemm, "%dx%dx%d", &m, &k, &n); err != nil || m < 1 || k < 1 || n < 1 {
			return fmt.Errorf("--gemm %q: want MxKxN with positive sizes, e.g. 2560x768x3072", gemm)
		}
	}
	start := time.Now()
	model, err := rt.open(target)
	if err != nil {
		return err
	}
	open := time.Since(start).Seconds()
	if cacheFor != nil {
		if pf.Cache, err = cacheFor(model.Manifest); err != nil {
			return err
		}
	}
	pf.WarmAll = rt.device.CUDA
	report, err := bench.Parts(model, pf)
	if err != nil {
		return err
	}
	report.OpenSeconds, report.Threads, report.Tuning = open, rt.threads, rt.tuning.String()
	var peak *onnxrt.GEMMResult
	if gemm != "" {
		opt, err := rt.sessionOptions()
		if err != nil {
			return err
		}
		r, err := onnxrt.MeasureGEMM(opt, m, k, n, 10)
		if err != nil {
			return err
		}
		peak = &r
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(struct {
			bench.PartsReport
			GEMM *onnxrt.GEMMResult `json:"gemm,omitempty"`
		}{report, peak})
	}
	return bench.PrintParts(os.Stdout, report, peak)
}
