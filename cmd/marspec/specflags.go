package main

import (
	"flag"
	"fmt"
	"strings"

	"marspec/api"
	"marspec/arsampler"
	"marspec/generation"
	"marspec/mar"
)

// specFlags are the speculative decoding settings shared by generate and bench; eval's
// configurations fill them too. They are checked by package generation, like a request.
type specFlags struct {
	gamma, verify, acceptance, align string
	schedule                         string // auto, batched or lazy
	provider                         string // resolves schedule auto: lazy on cpu, batched on cuda
	prefill                          float64
	maxTries                         int
	selfDraft                        bool    // --draft self (generate), draft=self (eval): no draft network
	earlyExit                        bool    // --draft exit, draft=exit: the target's first blocks + trained exit draft
	exitMaxError                     float64 // --exit-max-error, exit_max_error=: the exit's confidence bound; 0 = none
	rejection                        string  // residual (default) or target (seed 000's practical variant)
	tolerance                        float64 // acceptance tolerance lambda in nats; 0 = off
}

func (s *specFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&s.gamma, "gamma", "8", "draft tokens per round: a number, or auto (chosen per round from measured alpha and cost)")
	fs.Float64Var(&s.prefill, "prefill", 0.05, "fraction of tokens the target generates alone first")
	fs.StringVar(&s.verify, "verify", "prefix", "prefix (the paper's Algorithm 1) or group (one target pass per round, tokens judged independently)")
	fs.StringVar(&s.acceptance, "acceptance", "paper", "paper (with Sigma) or exact (Sigma = 1, lossless)")
	fs.StringVar(&s.align, "align", "on", "share noise between draft and target: on or off")
	fs.StringVar(&s.schedule, "schedule", "auto", "prefix rounds: batched (one target pass over gamma+1 contexts), lazy (depth by depth, same images, fewer rows), or auto (lazy on cpu, batched on cuda and with --draft self or exit; exit runs batched only)")
	fs.IntVar(&s.maxTries, "max-resample-tries", 1000, "bound on acceptance-rejection tries per rejected token")
	fs.StringVar(&s.rejection, "rejection", "residual", "a rejected draft becomes: residual (a draw from the modified distribution, lossless with exact) or target (the target's own draw: free, lossy, TV bias per token at most alpha)")
	fs.Float64Var(&s.exitMaxError, "exit-max-error", 0, "with --draft exit: stop a round's drafting at the first position whose predicted RMS error of the exit exceeds this (0 = no bound, gamma drafts)")
	fs.Float64Var(&s.tolerance, "tolerance", 0, "acceptance tolerance lambda in nats: accept with min(1, e^lambda r); 0 = off, > 0 lossy (see docs/speculative.md)")
}

// request copies the settings into req: those named in set only (the flags given on the
// command line, so a preset's values are not overridden by flag defaults), or all when set is
// nil.
func (s *specFlags) request(req *generation.Request, set map[string]bool) error {
	given := func(flagName string) bool { return set == nil || set[flagName] }
	if given("gamma") {
		req.Gamma = api.Gamma(s.gamma)
	}
	if given("prefill") {
		req.Prefill = &s.prefill
	}
	if given("verify") {
		req.Verify = s.verify
	}
	if given("acceptance") {
		req.Acceptance = s.acceptance
	}
	if given("align") {
		on, err := generation.ParseSwitch("align", s.align)
		if err != nil {
			return err
		}
		req.Align = &on
	}
	if given("schedule") {
		req.Schedule = s.schedule
	}
	if given("max-resample-tries") {
		req.MaxResampleTries = &s.maxTries
	}
	if given("rejection") {
		req.Rejection = s.rejection
	}
	if given("tolerance") {
		req.Tolerance = &s.tolerance
	}
	if given("exit-max-error") {
		req.ExitMaxError = &s.exitMaxError
	}
	req.SelfDraft, req.EarlyExit = s.selfDraft, s.earlyExit
	return nil
}

// config checks every setting (generation.SpecConfig) and returns the configuration with opt
// as the target's sampling options.
func (s *specFlags) config(opt mar.Options) (arsampler.Config, error) {
	var req generation.Request
	if err := s.request(&req, nil); err != nil {
		return arsampler.Config{}, err
	}
	return generation.SpecConfig(req, s.provider, opt)
}

func (s *specFlags) describe() string {
	return fmt.Sprintf("gamma=%s prefill=%g verify=%s acceptance=%s align=%s", s.gamma, s.prefill, s.verify, s.acceptance, s.align)
}

// describeKnobs is what describe leaves out: the draft source and the lossy knobs, when not at
// their defaults (so existing descriptions stay as they were).
func (s *specFlags) describeKnobs() string {
	var parts []string
	if s.selfDraft {
		parts = append(parts, "draft="+generation.DraftSelf)
	}
	if s.earlyExit {
		parts = append(parts, "draft="+generation.DraftExit)
		if s.exitMaxError != 0 {
			parts = append(parts, fmt.Sprintf("exit_max_error=%g", s.exitMaxError))
		}
	}
	if s.rejection != "" && s.rejection != "residual" {
		parts = append(parts, "rejection="+s.rejection)
	}
	if s.tolerance != 0 {
		parts = append(parts, fmt.Sprintf("tolerance=%g", s.tolerance))
	}
	return strings.Join(parts, " ")
}
