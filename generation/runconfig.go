package generation

import (
	"fmt"
	"strconv"
	"strings"

	"marspec/api"
	"marspec/mar"
)

// A run configuration is how scoring runs and the frontier name what to sample:
// kind[:key=value...], e.g. target:num_iter=7:steps=25 or spec:verify=group:gamma=4. It is
// read into a Request here and checked by ValidateRequest, so a configuration and an HTTP
// request with the same settings pass or fail alike, with the same field errors.

// Keys a configuration may set, by kind.
const (
	RunConfigKeysTarget = "num_iter, steps, anneal, final_noise, sampler, eta, temperature, precision, cache, cache_full_steps, cache_refresh_every, cache_recompute, cache_cfg_reuse"
	RunConfigKeysSpec   = "gamma, prefill, verify, acceptance, align, draft, exit_max_error, rejection, tolerance, steps, precision"
)

// RunConfig is one checked configuration.
type RunConfig struct {
	Kind string // ModeTarget, ModeDraft or ModeSpec
	Plan Plan   // as ValidateRequest made it (classes are a placeholder: a run picks its own)
	// Name is the configuration's folder in a run: stable for the defaults (target, draft,
	// spec-g8-p0.05-prefix-paper-alignon), so older runs keep their chunks. Desc is its line
	// in reports.
	Name, Desc string
	// The speculative settings as written in Name (spec only): what plots group by.
	Gamma, Verify, Acceptance, Align string
	Prefill                          float64
}

// ParseRunConfig reads text over base, the settings a run shares (seed, cfg, temperature,
// steps, schedule), and checks the result as a request against cat. Baselines (target, draft)
// keep the final step's noise on unless final_noise=off, so that they and spec mode sample
// alike; spec starts from its own defaults (gamma 8, prefill 0.05, prefix, paper, align on).
func ParseRunConfig(text string, base Request, cat Catalog) (RunConfig, error) {
	rc, req, err := readRunConfig(text, base)
	if err != nil {
		return rc, fmt.Errorf("configuration %q: %w", text, err)
	}
	if rc.Plan, err = ValidateRequest(req, cat); err != nil {
		return rc, fmt.Errorf("configuration %q: %w", text, err)
	}
	if rc.Kind == ModeSpec {
		rc.Gamma = rc.Plan.GammaText
		rc.Prefill = rc.Plan.Spec.Prefill
		rc.Verify, rc.Acceptance = pick(req.Verify, "", "prefix"), pick(req.Acceptance, "", "paper")
		rc.Align = "on"
		if !rc.Plan.Spec.Align {
			rc.Align = "off"
		}
		rc.Name = fmt.Sprintf("spec-g%s-p%g-%s-%s-align%s", rc.Gamma, rc.Prefill, rc.Verify, rc.Acceptance, rc.Align) + rc.Name
		rc.Desc = fmt.Sprintf("spec gamma=%s prefill=%g verify=%s acceptance=%s align=%s", rc.Gamma, rc.Prefill, rc.Verify, rc.Acceptance, rc.Align) + rc.Desc
	} else {
		rc.Name, rc.Desc = rc.Kind+rc.Name, rc.Kind+"-only"+rc.Desc
	}
	return rc, nil
}

// readRunConfig fills the request from the text; rc.Name and rc.Desc get what the keys add
// to the kind's base name and description.
func readRunConfig(text string, base Request) (RunConfig, Request, error) {
	req := base
	kind, rest, _ := strings.Cut(text, ":")
	rc := RunConfig{Kind: kind}
	req.Mode = kind
	on := true
	switch kind {
	case ModeTarget, ModeDraft:
		req.FinalStepNoise = &on
		req.Schedule = "" // the run's prefix-round schedule concerns its spec configurations only
	case ModeSpec:
	default:
		return rc, req, fieldErr("kind", strconv.Quote(kind), "target, draft, spec", "unknown")
	}
	var suffix, extra []string
	for _, kv := range strings.Split(rest, ":") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return rc, req, fieldErr("configuration", strconv.Quote(kv), "key=value", "not a setting")
		}
		named, described, err := setRunConfigKey(&req, kind, k, v)
		if err != nil {
			return rc, req, err
		}
		if named != "" {
			suffix = append(suffix, named)
		}
		if described {
			extra = append(extra, k+"="+v)
		}
	}
	if len(suffix) > 0 {
		rc.Name = "-" + strings.Join(suffix, "-")
		rc.Desc = " " + strings.Join(dedupe(extra), " ")
	}
	return rc, req, nil
}

// setRunConfigKey sets one key; it returns the key's part of the configuration's name ("" for
// one the name spells out already, or a default) and whether the description lists it.
func setRunConfigKey(req *Request, kind, k, v string) (named string, described bool, err error) {
	named, err = setKey(req, kind, k, v)
	switch {
	case kind != ModeSpec:
		described = true
	case k == "steps" || k == "draft" || k == "exit_max_error" || k == "rejection" || k == "tolerance" || k == "precision":
		described = true
	}
	return named, described, err
}

func setKey(req *Request, kind, k, v string) (named string, err error) {
	whole := func() (*int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fieldErr(k, strconv.Quote(v), "a whole number", "not a whole number")
		}
		// a request's 0 means the default; here it would name the default configuration again
		// under another folder, so the configuration without the key is the way to say it
		if n == 0 {
			return nil, fieldErr(k, 0, "at least 1, or leave the key out for the default", "0 would repeat the default under another name")
		}
		return &n, nil
	}
	number := func() (*float64, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fieldErr(k, strconv.Quote(v), "a number", "not a number")
		}
		return &f, nil
	}
	baseline := kind != ModeSpec
	switch {
	case k == "precision": // over the run's --precision, so one run can hold fp32 and int8 points side by side
		if _, err := mar.ParsePrecision(v); err != nil || v == "" {
			return "", fieldErr(k, strconv.Quote(v), mar.PrecisionNames(), "unknown")
		}
		req.Precision = v
		return v, nil
	case k == "steps":
		req.Steps, err = whole()
		return "s" + v, err
	case k == "num_iter" && baseline:
		req.NumIter, err = whole()
		return "it" + v, err
	case k == "anneal" && baseline:
		req.StepsLate, err = whole()
		return "late" + v, err
	case k == "final_noise" && baseline:
		noise, err := ParseSwitch("final_noise", v)
		if err != nil {
			return "", err
		}
		req.FinalStepNoise = &noise
		if noise {
			return "", nil
		}
		return "nofinalnoise", nil
	case k == "sampler" && baseline: // checked with the request (ValidateRequest)
		req.Sampler = v
		return v, nil
	case k == "eta" && baseline:
		req.Eta, err = number()
		return "eta" + v, err
	case k == "temperature" && baseline: // over the run's --temperature, so one run can set points at several
		req.Temperature, err = number()
		return "temp" + v, err
	case strings.HasPrefix(k, "cache") && baseline:
		return setCacheKey(req, k, v)
	case baseline:
		return "", fieldErr(k, strconv.Quote(v), RunConfigKeysTarget, "unknown for "+kind)
	}
	switch k {
	case "gamma":
		req.Gamma = api.Gamma(v)
	case "prefill":
		req.Prefill, err = number()
	case "verify":
		req.Verify = v
	case "acceptance":
		req.Acceptance = v
	case "align":
		var on bool
		on, err = ParseSwitch("align", v)
		req.Align = &on
	case "draft":
		switch v {
		case "pack", DraftSelf, DraftExit:
			req.SelfDraft, req.EarlyExit = v == DraftSelf, v == DraftExit
		default:
			return "", fieldErr("draft", strconv.Quote(v), "pack, "+DraftSelf+", "+DraftExit, "unknown")
		}
		return k + v, nil
	case "exit_max_error":
		req.ExitMaxError, err = number()
		return k + v, err
	case "rejection":
		req.Rejection = v
		return k + v, nil
	case "tolerance":
		req.Tolerance, err = number()
		return k + v, err
	default:
		return "", fieldErr(k, strconv.Quote(v), RunConfigKeysSpec, "unknown for spec")
	}
	return "", err
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// PresetFromRunConfig is the preset that samples as the run configuration text does (target
// and draft kinds): the form a frontier's chosen point takes in a pack's manifest.
func PresetFromRunConfig(text string) (Preset, error) {
	_, req, err := readRunConfig(text, Request{})
	if err != nil {
		return Preset{}, err
	}
	if req.Mode == ModeSpec {
		return Preset{}, fieldErr("configuration", strconv.Quote(text), "a target or draft configuration", "spec configurations are not tuned into presets")
	}
	p := Preset{Mode: req.Mode, Sampler: req.Sampler, Eta: req.Eta}
	if req.NumIter != nil {
		p.NumIter = *req.NumIter
	}
	if req.Steps != nil {
		p.Steps = *req.Steps
	}
	if req.StepsLate != nil {
		p.StepsLate = *req.StepsLate
	}
	p.FinalStepNoise = req.FinalStepNoise != nil && *req.FinalStepNoise
	p.Temperature = req.Temperature
	if req.Precision != mar.FP32 {
		p.Precision = req.Precision
	}
	return p, nil
}
