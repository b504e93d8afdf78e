package main

import (
	"flag"
	"fmt"
	"strconv"

	"marspec/align"
	"marspec/arsampler"
	"marspec/mar"
)

// specFlags are the speculative decoding settings shared by generate and bench.
type specFlags struct {
	gamma, verify, acceptance, align string
	schedule                         string // auto, batched or lazy
	provider                         string // resolves schedule auto: lazy on cpu, batched on cuda
	prefill                          float64
	maxTries                         int
}

func (s *specFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&s.gamma, "gamma", "8", "draft tokens per round: a number, or auto (chosen per round from measured alpha and cost)")
	fs.Float64Var(&s.prefill, "prefill", 0.05, "fraction of tokens the target generates alone first")
	fs.StringVar(&s.verify, "verify", "prefix", "prefix (the paper's Algorithm 1) or group (one target pass per round, tokens judged independently)")
	fs.StringVar(&s.acceptance, "acceptance", "paper", "paper (with Sigma) or exact (Sigma = 1, lossless)")
	fs.StringVar(&s.align, "align", "on", "share noise between draft and target: on or off")
	fs.StringVar(&s.schedule, "schedule", "auto", "prefix rounds: batched (one target pass over gamma+1 contexts), lazy (depth by depth, same images, fewer rows), or auto (lazy on cpu, batched on cuda)")
	fs.IntVar(&s.maxTries, "max-resample-tries", 1000, "bound on acceptance-rejection tries per rejected token")
}

func (s *specFlags) config(opt mar.Options) (arsampler.Config, error) {
	cfg := arsampler.DefaultConfig()
	cfg.Sampling = opt
	if s.gamma == "auto" {
		cfg.AutoGamma = true
	} else {
		g, err := strconv.Atoi(s.gamma)
		if err != nil {
			return cfg, fmt.Errorf("gamma %q is not a number (allowed: 1 to 256, or auto)", s.gamma)
		}
		cfg.Gamma = g
	}
	cfg.Prefill = s.prefill
	var err error
	if cfg.Verify, err = arsampler.ParseVerify(s.verify); err != nil {
		return cfg, err
	}
	if cfg.Acceptance, err = align.ParseCriterion(s.acceptance); err != nil {
		return cfg, err
	}
	switch s.align {
	case "on":
		cfg.Align = true
	case "off":
		cfg.Align = false
	default:
		return cfg, fmt.Errorf("align %q unknown (allowed: on, off)", s.align)
	}
	if cfg.Schedule, err = s.resolveSchedule(); err != nil {
		return cfg, err
	}
	cfg.MaxResampleTries = s.maxTries
	return cfg, nil
}

// resolveSchedule picks the schedule; auto follows the execution provider, because a CPU pays
// for every context row while a GPU pays mostly for every sequential call.
func (s *specFlags) resolveSchedule() (arsampler.Schedule, error) {
	switch s.schedule {
	case "", "auto":
		if s.provider == "cuda" {
			return arsampler.Batched, nil
		}
		return arsampler.Lazy, nil
	}
	v, err := arsampler.ParseSchedule(s.schedule)
	if err != nil {
		return v, fmt.Errorf("schedule %q unknown (allowed: auto, batched, lazy)", s.schedule)
	}
	return v, nil
}

func (s *specFlags) describe() string {
	return fmt.Sprintf("gamma=%s prefill=%g verify=%s acceptance=%s align=%s", s.gamma, s.prefill, s.verify, s.acceptance, s.align)
}
