package generation

import "sort"

// Preset is a named bundle of settings. Fields a request sets explicitly win over the preset's;
// a request's mode must agree with the preset's.
type Preset struct {
	Mode      string
	NumIter   int // target/draft modes; 0 = one token per step
	Steps     int // diffusion steps; 0 = the pack's
	StepsLate int // diffusion steps of the last AR step (annealing); 0 = off
	// Sampler and Eta choose the head sampler ("" = ddpm; Eta nil = the sampler's default).
	// Steps go with the sampler: a request naming another sampler gets the pack's steps.
	Sampler string
	Eta     *float64
	// FinalStepNoise gives the last diffusion step its variance, as every frontier
	// configuration was measured (docs/FRONTIER.md); false leaves the request's default.
	FinalStepNoise bool
	// Fallback is the preset a request runs with instead when this one's settings do not fit
	// it or its pack (a pack without a distilled head, a temperature the distilled head cannot
	// scale); the plan then names the fallback. "" = such a request is refused.
	Fallback   string
	Gamma      string // spec mode
	Verify     string
	Acceptance string
	About      string
}

// Presets is the one table of named presets, chosen from the speed/quality frontier measured
// on the embedded pair (docs/FRONTIER.md, "Head samplers and the distilled head on the
// frontier": N = 2,000 per configuration, CFG 1 and 3, three seeds, configurations interleaved in
// one process, speeds from a run on the quiet machine). Speeds are against the
// one-token-per-step target; "FID" is the mean over the seeds' paired differences to it.
// The rule for the default: the fastest Pareto point whose FID stays within the reference's
// sampling noise (the two-sample FID between two seeds of the target, 1.00 at this N).
// fast needs the pack's distilled head (and temperature 1, cfg up to 4): a request or pack it
// does not fit runs balanced, the best training-free point, which every pack can run.
var Presets = map[string]Preset{
	"fast": {Mode: ModeTarget, NumIter: 3, Steps: 2, Sampler: "distilled", FinalStepNoise: true, Fallback: "balanced",
		About: "target alone, 3 AR steps, the distilled head in 2 steps: 18.3x the one-token-per-step target, FID 0.6 better (within noise); packs without the head run balanced"},
	"balanced": {Mode: ModeTarget, NumIter: 3, Steps: 10, Sampler: "ddim", Eta: ptr(1.0), FinalStepNoise: true,
		About: "target alone, 3 AR steps, ddim eta 1 in 10 steps (training-free, any pack): 12.1x the one-token-per-step target, FID 8.3 better"},
	"quality": {Mode: ModeTarget, NumIter: 4, Steps: 25, Sampler: "ddim", Eta: ptr(1.0), FinalStepNoise: true,
		About: "target alone, 4 AR steps, ddim eta 1 in 25 steps: 6.4x the one-token-per-step target, the best FID measured (12.2 better)"},
	"exact": {Mode: ModeSpec, Verify: "prefix", Acceptance: "exact",
		About: "speculative decoding, lossless with respect to the one-token-per-step target (0.66x its speed on a CPU)"},
}

func ptr[T any](v T) *T { return &v }

// PresetNames lists the presets in a stable order.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
