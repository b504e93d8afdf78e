package generation

import (
	"fmt"
	"strings"

	"marspec/api"
	"marspec/arsampler"
	"marspec/diffusion"
	"marspec/mar"
)

// Settings is the plan as the wire reports it.
func (p Plan) Settings() api.Settings {
	o := p.Options
	s := api.Settings{Mode: p.Mode, Preset: p.Preset, Target: p.Pack, Classes: p.Classes, ClassNames: p.ClassNames,
		Seed: o.Seed, CFG: o.CFG, CFGSchedule: o.CFGSchedule, Temperature: o.Temperature, NumIter: o.NumIter,
		Steps: o.Steps, FinalNoise: o.FinalStepNoise, Params: p.Params()}
	if o.Sampler != "" && o.Sampler != diffusion.DDPM {
		s.Sampler, s.Eta = string(o.Sampler), o.Eta
	}
	if p.Precision != "" && p.Precision != mar.FP32 {
		s.Precision = p.Precision
	}
	if o.Cache.On {
		s.Cache = o.Cache.String()
	}
	if p.Spec != nil {
		s.Draft = p.DraftSource()
		c := p.Spec
		s.Spec = &api.Spec{Gamma: p.GammaText, Prefill: c.Prefill, Verify: c.Verify.String(), Acceptance: c.Acceptance.String(),
			Align: c.Align, Schedule: c.Schedule.String(), MaxResampleTries: c.MaxResampleTries}
		s.FinalNoise = true // speculative decoding always gives the last step its variance
	}
	return s
}

// Params is the provenance text every PNG of the plan carries (the per-image part is added by
// ImageParams): enough to make the image again.
func (p Plan) Params() string {
	o := p.Options
	parts := []string{"mode=" + p.Mode}
	if p.Preset != "" {
		parts = append(parts, "preset="+p.Preset)
	}
	if p.Spec != nil {
		parts = append(parts, "target="+p.Pack, "draft="+p.DraftSource())
	} else {
		parts = append(parts, "pack="+p.Pack)
	}
	parts = append(parts, fmt.Sprintf("seed=%d cfg=%g cfg_schedule=%s temperature=%g num_iter=%d steps=%d final_step_noise=%v",
		o.Seed, o.CFG, o.CFGSchedule, o.Temperature, o.NumIter, o.Steps, o.FinalStepNoise || p.Spec != nil))
	if o.Sampler != "" && o.Sampler != diffusion.DDPM { // only when not the default: old images' text stays
		parts = append(parts, "sampler="+string(o.Sampler))
		if o.Sampler.HasEta() {
			parts = append(parts, fmt.Sprintf("eta=%g", o.Eta))
		}
	}
	if p.Precision != "" && p.Precision != mar.FP32 { // only when not the default, as the sampler
		parts = append(parts, "precision="+p.Precision)
	}
	if c := o.Cache; c.On { // only when on, as the sampler
		parts = append(parts, fmt.Sprintf("cache=full_steps:%d,refresh_every:%d,recompute:%d,cfg_reuse:%v",
			c.FullSteps, c.RefreshEvery, c.Recompute, c.ReuseCFG))
	}
	if o.StepsLate != 0 { // only when set, so the text of a plain request never changes
		parts = append(parts, fmt.Sprintf("steps_late=%d", o.StepsLate))
	}
	if c := p.Spec; c != nil {
		align := "on"
		if !c.Align {
			align = "off"
		}
		parts = append(parts, fmt.Sprintf("gamma=%s prefill=%g verify=%s acceptance=%s align=%s schedule=%s max_resample_tries=%d",
			p.GammaText, c.Prefill, c.Verify, c.Acceptance, align, c.Schedule, c.MaxResampleTries))
		if c.EarlyExit && c.ExitMaxError > 0 {
			parts = append(parts, fmt.Sprintf("exit_max_error=%g", c.ExitMaxError))
		}
		if knobs := p.LossyKnobs(); knobs != "" {
			parts = append(parts, knobs)
		}
	}
	return strings.Join(parts, " ")
}

// Draft sources other than a pack, as written in settings and on the command line.
const (
	DraftSelf = "self" // the target drafts from its own previous pass
	DraftExit = "exit" // the target's first blocks plus its trained exit draft
)

// DraftSource is what drafts in a spec plan: DraftSelf, DraftExit or the draft pack's name
// ("" outside spec mode).
func (p Plan) DraftSource() string {
	switch {
	case p.Spec == nil:
		return ""
	case p.Spec.EarlyExit:
		return DraftExit
	case p.Spec.SelfDraft:
		return DraftSelf
	}
	return p.DraftPack
}

// ImageParams is the provenance of image img of the plan.
func (p Plan) ImageParams(img Image) string {
	s := fmt.Sprintf("%s class=%d (%s) index=%d", p.Params(), img.Class, p.ClassNames[img.Index], img.Index)
	if img.Spec != nil {
		s += fmt.Sprintf(" alpha=%.4f", img.Spec.Alpha())
	}
	return s
}

// LossyKnobs names the lossy speculative settings that differ from their defaults
// ("rejection=target tolerance=0.5"), or "".
func (p Plan) LossyKnobs() string {
	c := p.Spec
	if c == nil {
		return ""
	}
	var parts []string
	if c.Rejection != arsampler.Residual {
		parts = append(parts, "rejection="+c.Rejection.String())
	}
	if c.Tolerance != 0 {
		parts = append(parts, fmt.Sprintf("tolerance=%g", c.Tolerance))
	}
	return strings.Join(parts, " ")
}

// SpecText is the speculative configuration in a line ("gamma=8 prefill=0.05 verify=prefix
// acceptance=paper align=on", then self-drafting and the lossy knobs when set), or "".
func (p Plan) SpecText() string {
	c := p.Spec
	if c == nil {
		return ""
	}
	align := "on"
	if !c.Align {
		align = "off"
	}
	s := fmt.Sprintf("gamma=%s prefill=%g verify=%s acceptance=%s align=%s", p.GammaText, c.Prefill, c.Verify, c.Acceptance, align)
	if c.SelfDraft || c.EarlyExit {
		s += " draft=" + p.DraftSource()
	}
	if c.EarlyExit && c.ExitMaxError > 0 {
		s += fmt.Sprintf(" exit_max_error=%g", c.ExitMaxError)
	}
	if knobs := p.LossyKnobs(); knobs != "" {
		s += " " + knobs
	}
	return s
}
