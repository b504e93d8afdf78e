package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"marspec/mar"
)

// runConfig is one configuration of a scoring run or a frontier: a mode and the values of its
// knobs, written as kind[:key=value...] (target:num_iter=7:steps=25, spec:verify=group:gamma=4).
type runConfig struct {
	kind string      // target, draft or spec
	opt  mar.Options // sampling settings (spec: the target's; num_iter is one token per step)
	spec *specFlags  // spec only
	// name is the configuration's folder in a run: stable for the defaults (target, draft,
	// spec-g8-p0.05-prefix-paper-alignon), so older runs keep their chunks.
	name, desc string
}

const configKeysTarget = "num_iter, steps, anneal, final_noise"
const configKeysSpec = "gamma, prefill, verify, acceptance, align, draft, exit_max_error, rejection, tolerance, steps"

// parseRunConfig reads one configuration against the run's settings. Every value is checked
// here, before anything is generated or written.
func parseRunConfig(text string, s evalSettings, target *mar.Model, base specFlags) (runConfig, error) {
	fail := func(format string, a ...any) (runConfig, error) {
		return runConfig{}, fmt.Errorf("configuration %q: %s", text, fmt.Sprintf(format, a...))
	}
	// baselines give the last step its variance too, so spec and target-only are like for like
	rc := runConfig{opt: mar.Options{Seed: s.Seed, CFG: s.CFG, Temperature: s.Temperature, Steps: s.Steps,
		Batch: s.Batch, FinalStepNoise: true}}
	kind, rest, _ := strings.Cut(text, ":")
	rc.kind = kind
	var sf specFlags
	switch kind {
	case "target", "draft":
	case "spec":
		sf = base
		sf.gamma, sf.prefill, sf.verify, sf.acceptance, sf.align, sf.maxTries = "8", 0.05, "prefix", "paper", "on", 1000
	default:
		return fail("kind %q unknown (allowed: target, draft, spec)", kind)
	}
	// suffix names the configuration's folder; extra describes what the base description lacks
	var suffix, extra []string
	for _, kv := range strings.Split(rest, ":") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fail("%q is not key=value", kv)
		}
		num := func(least int, what string) (int, error) {
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, fmt.Errorf("configuration %q: %s %q is not a whole number", text, k, v)
			}
			if n < least {
				return 0, fmt.Errorf("configuration %q: %s %d must be at least %d (%s)", text, k, n, least, what)
			}
			return n, nil
		}
		var err error
		switch {
		case k == "steps":
			rc.opt.Steps, err = num(1, "diffusion sampling steps")
			suffix = append(suffix, "s"+v)
		case k == "num_iter" && kind != "spec":
			rc.opt.NumIter, err = num(1, "AR steps")
			suffix = append(suffix, "it"+v)
		case k == "anneal" && kind != "spec":
			rc.opt.StepsLate, err = num(1, "diffusion steps of the last AR step")
			suffix = append(suffix, "late"+v)
		case k == "final_noise" && kind != "spec":
			switch v {
			case "on":
			case "off":
				rc.opt.FinalStepNoise = false
				suffix = append(suffix, "nofinalnoise")
			default:
				err = fmt.Errorf("configuration %q: final_noise %q unknown (allowed: on, off)", text, v)
			}
		case kind == "spec":
			if err := sf.set(k, v); err != nil {
				return fail("%v", err)
			}
			if k != "draft" && k != "rejection" && k != "tolerance" && k != "exit_max_error" {
				continue // in the spec description and name already
			}
			suffix = append(suffix, k+v)
		default:
			allowed := configKeysTarget
			if kind == "spec" {
				allowed = configKeysSpec
			}
			return fail("key %q unknown for %s (allowed: %s)", k, kind, allowed)
		}
		if err != nil {
			return runConfig{}, err
		}
		extra = append(extra, k+"="+v)
	}
	if err := target.Validate(&rc.opt); err != nil {
		return fail("%v", err)
	}
	rc.name, rc.desc = kind, kind+"-only"
	if kind == "spec" {
		rc.spec = &sf
		rc.name = fmt.Sprintf("spec-g%s-p%g-%s-%s-align%s", sf.gamma, sf.prefill, sf.verify, sf.acceptance, sf.align)
		rc.desc = "spec " + sf.describe()
	}
	if len(suffix) > 0 {
		rc.name += "-" + strings.Join(suffix, "-")
		rc.desc += " " + strings.Join(dedupe(extra), " ")
	}
	return rc, nil
}

// set applies one spec configuration key; the values are checked later by specFlags.config.
func (s *specFlags) set(k, v string) error {
	switch k {
	case "gamma":
		s.gamma = v
	case "prefill":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("prefill %q is not a number", v)
		}
		s.prefill = f
	case "verify":
		s.verify = v
	case "acceptance":
		s.acceptance = v
	case "align":
		s.align = v
	case "draft":
		switch v {
		case "pack", selfDraftName, exitDraftName:
			s.selfDraft, s.earlyExit = v == selfDraftName, v == exitDraftName
		default:
			return fmt.Errorf("draft %q unknown (allowed: pack, %s, %s)", v, selfDraftName, exitDraftName)
		}
	case "exit_max_error":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return fmt.Errorf("exit max error %q out of range (allowed: 0 = no bound, or a positive RMS error)", v)
		}
		s.exitMaxError = f
	case "rejection":
		s.rejection = v // checked by config, with the flag's message
	case "tolerance":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return fmt.Errorf("tolerance %q must be a number of nats, at least 0 (0 = off)", v)
		}
		s.tolerance = f
	default:
		return fmt.Errorf("key %q unknown for spec (allowed: %s)", k, configKeysSpec)
	}
	return nil
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
