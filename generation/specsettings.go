package generation

import (
	"fmt"
	"strings"

	"marspec/api"
	"marspec/arsampler"
	"marspec/mar"
)

// SpecSettings are speculative decoding's settings as the command line and the benchmarks
// write them (gamma as text, align as on/off); Request turns them into a Request's fields, so
// they are checked like a request's.
type SpecSettings struct {
	Gamma, Verify, Acceptance, Align string
	Schedule                         string // auto, batched or lazy
	Provider                         string // resolves schedule auto: lazy on cpu, batched on cuda
	Prefill                          float64
	MaxTries                         int
	SelfDraft                        bool    // draft self: no draft network
	EarlyExit                        bool    // draft exit: the target's first blocks + trained exit draft
	ExitMaxError                     float64 // the exit's confidence bound; 0 = none
	Rejection                        string  // residual (default) or target (seed 000's practical variant)
	Tolerance                        float64 // acceptance tolerance lambda in nats; 0 = off
}

// Request copies the settings into req: those named in set only (the flags given on the
// command line, so a preset's values are not overridden by flag defaults), or all when set is
// nil.
func (s *SpecSettings) Request(req *Request, set map[string]bool) error {
	given := func(flagName string) bool { return set == nil || set[flagName] }
	if given("gamma") {
		req.Gamma = api.Gamma(s.Gamma)
	}
	if given("prefill") {
		req.Prefill = &s.Prefill
	}
	if given("verify") {
		req.Verify = s.Verify
	}
	if given("acceptance") {
		req.Acceptance = s.Acceptance
	}
	if given("align") {
		on, err := ParseSwitch("align", s.Align)
		if err != nil {
			return err
		}
		req.Align = &on
	}
	if given("schedule") {
		req.Schedule = s.Schedule
	}
	if given("max-resample-tries") {
		req.MaxResampleTries = &s.MaxTries
	}
	if given("rejection") {
		req.Rejection = s.Rejection
	}
	if given("tolerance") {
		req.Tolerance = &s.Tolerance
	}
	if given("exit-max-error") {
		req.ExitMaxError = &s.ExitMaxError
	}
	req.SelfDraft, req.EarlyExit = s.SelfDraft, s.EarlyExit
	return nil
}

// Config checks every setting (generation.SpecConfig) and returns the configuration with opt
// as the target's sampling options.
func (s *SpecSettings) Config(opt mar.Options) (arsampler.Config, error) {
	var req Request
	if err := s.Request(&req, nil); err != nil {
		return arsampler.Config{}, err
	}
	return SpecConfig(req, s.Provider, opt)
}

// Describe is the settings as reports name them.
func (s *SpecSettings) Describe() string {
	return fmt.Sprintf("gamma=%s prefill=%g verify=%s acceptance=%s align=%s", s.Gamma, s.Prefill, s.Verify, s.Acceptance, s.Align)
}

// DescribeKnobs is what Describe leaves out: the draft source and the lossy knobs, when not at
// their defaults (so existing descriptions stay as they were).
func (s *SpecSettings) DescribeKnobs() string {
	var parts []string
	if s.SelfDraft {
		parts = append(parts, "draft="+DraftSelf)
	}
	if s.EarlyExit {
		parts = append(parts, "draft="+DraftExit)
		if s.ExitMaxError != 0 {
			parts = append(parts, fmt.Sprintf("exit_max_error=%g", s.ExitMaxError))
		}
	}
	if s.Rejection != "" && s.Rejection != "residual" {
		parts = append(parts, "rejection="+s.Rejection)
	}
	if s.Tolerance != 0 {
		parts = append(parts, fmt.Sprintf("tolerance=%g", s.Tolerance))
	}
	return strings.Join(parts, " ")
}
