package generation

import (
	"marspec/diffusion"
	"marspec/mar"
)

// specSampler refuses head samplers speculative decoding cannot use. Its acceptance test needs
// each step to be a Gaussian given the current state (diffusion.Sampler.GaussianSteps): ddpm,
// and ddim with eta > 0. The speculative path (mar.Stepper, diffusion.Trace) implements the
// ddpm step only, so ddim is refused too until it is wired there, with its own reason.
func specSampler(o mar.Options) error {
	s := o.Sampler
	if s == "" || s == diffusion.DDPM {
		return nil
	}
	if s.GaussianSteps(o.Eta) {
		return fieldErr("sampler", string(s), "ddpm", "qualifies for spec mode in law (Gaussian steps) but is not wired into speculative decoding yet")
	}
	return fieldErr("sampler", string(s), "ddpm (ddim with eta > 0 once wired)",
		"its steps are not Gaussian given the previous state, so spec mode has no densities to compare; use mode target or draft")
}
