package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

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
	selfDraft                        bool    // --draft self (generate), draft=self (eval): no draft network
	rejection                        string  // residual (default) or target (seed 000's practical variant)
	tolerance                        float64 // acceptance tolerance lambda in nats; 0 = off
}

func (s *specFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&s.gamma, "gamma", "8", "draft tokens per round: a number, or auto (chosen per round from measured alpha and cost)")
	fs.Float64Var(&s.prefill, "prefill", 0.05, "fraction of tokens the target generates alone first")
	fs.StringVar(&s.verify, "verify", "prefix", "prefix (the paper's Algorithm 1) or group (one target pass per round, tokens judged independently)")
	fs.StringVar(&s.acceptance, "acceptance", "paper", "paper (with Sigma) or exact (Sigma = 1, lossless)")
	fs.StringVar(&s.align, "align", "on", "share noise between draft and target: on or off")
	fs.StringVar(&s.schedule, "schedule", "auto", "prefix rounds: batched (one target pass over gamma+1 contexts), lazy (depth by depth, same images, fewer rows), or auto (lazy on cpu, batched on cuda)")
	fs.IntVar(&s.maxTries, "max-resample-tries", 1000, "bound on acceptance-rejection tries per rejected token")
	fs.StringVar(&s.rejection, "rejection", "residual", "a rejected draft becomes: residual (a draw from the modified distribution, lossless with exact) or target (the target's own draw: free, lossy, TV bias per token at most alpha)")
	fs.Float64Var(&s.tolerance, "tolerance", 0, "acceptance tolerance lambda in nats: accept with min(1, e^lambda r); 0 = off, > 0 lossy (see docs/speculative.md)")
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
	cfg.SelfDraft = s.selfDraft
	if s.rejection != "" {
		if cfg.Rejection, err = arsampler.ParseRejection(s.rejection); err != nil {
			return cfg, err
		}
	}
	cfg.Tolerance = s.tolerance
	return cfg, nil
}

// resolveSchedule picks the schedule; auto follows the execution provider, because a CPU pays
// for every context row while a GPU pays mostly for every sequential call.
func (s *specFlags) resolveSchedule() (arsampler.Schedule, error) {
	switch s.schedule {
	case "", "auto":
		// self-drafting's one gain is that a round's gamma+1 contexts share one pass; lazy
		// rounds give the same images with a pass per depth, so auto keeps it batched
		if s.provider == "cuda" || s.selfDraft {
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

// describeKnobs is what describe leaves out: the draft source and the lossy knobs, when not at
// their defaults (so existing descriptions stay as they were).
func (s *specFlags) describeKnobs() string {
	var parts []string
	if s.selfDraft {
		parts = append(parts, "draft=self")
	}
	if s.rejection != "" && s.rejection != "residual" {
		parts = append(parts, "rejection="+s.rejection)
	}
	if s.tolerance != 0 {
		parts = append(parts, fmt.Sprintf("tolerance=%g", s.tolerance))
	}
	return strings.Join(parts, " ")
}
