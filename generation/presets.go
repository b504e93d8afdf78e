package generation

import "sort"

// Preset is a named bundle of settings. Fields a request sets explicitly win over the preset's;
// a request's mode must agree with the preset's.
type Preset struct {
	Mode       string
	NumIter    int    // target/draft modes; 0 = one token per step
	Steps      int    // diffusion steps; 0 = the pack's
	StepsLate  int    // diffusion steps of the last AR step (annealing); 0 = off
	Gamma      string // spec mode
	Verify     string
	Acceptance string
	About      string
}

// Presets is the one table of named presets. The values come from the speed/quality frontier
// measured in docs/FRONTIER.md; until that is written these are placeholders: fast and balanced
// run the target alone with fewer AR steps (MAR's cosine schedule), exact runs lossless
// speculative decoding (prefix verification with the exact acceptance criterion).
var Presets = map[string]Preset{
	"fast":     {Mode: ModeTarget, NumIter: 7, About: "target alone, 7 AR steps"},
	"balanced": {Mode: ModeTarget, NumIter: 13, About: "target alone, 13 AR steps"},
	"exact":    {Mode: ModeSpec, Verify: "prefix", Acceptance: "exact", About: "speculative, lossless (exact acceptance)"},
}

// PresetNames lists the presets in a stable order.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
