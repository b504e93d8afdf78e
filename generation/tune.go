package generation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"marspec/mar"
)

// Tuned is what a tuning run measured: presets chosen by rule (scoring.TuneRules) with their
// provenance, and the guidance and temperature they were measured at.
type Tuned struct {
	Presets          map[string]Preset
	CFG, Temperature float64
}

// TuneSettings returns man's settings with the tuned presets written in: a preset measured at
// a guidance or temperature other than the pack's defaults carries them; an existing preset
// of the same name is replaced unless its provenance is published, which needs
// replacePublished; other presets stay. def names the default preset ("" keeps the pack's, or
// chooses fast, else the first tuned, for a pack without settings). The result is checked as
// the pack's settings are when it is read (CheckSettings).
func TuneSettings(man *mar.Manifest, t Tuned, def string, replacePublished bool) (*mar.Settings, error) {
	set := &mar.Settings{Defaults: mar.Defaults{CFG: 1, CFGSchedule: "linear", Temperature: 1,
		Provenance: "chosen: marspec's built-in defaults (one token per AR step, the pack's diffusion steps, ddpm, no guidance, temperature 1), written by marspec tune"}}
	if man.Settings != nil {
		cp := *man.Settings
		set = &cp
	}
	set.Presets = maps.Clone(set.Presets)
	if set.Presets == nil {
		set.Presets = map[string]Preset{}
	}
	names := slices.Sorted(maps.Keys(t.Presets))
	for _, name := range names {
		p := t.Presets[name]
		if old, ok := set.Presets[name]; ok && strings.HasPrefix(old.Provenance, "published:") && !replacePublished {
			return nil, fmt.Errorf("preset %s of pack %s is published (%s): tuning does not replace it without --replace-published", name, man.Name, old.Provenance)
		}
		if d := set.Defaults.CFG; t.CFG != 0 && t.CFG != max(d, 1) {
			p.CFG = ptr(t.CFG)
		}
		if d := set.Defaults.Temperature; t.Temperature != 0 && t.Temperature != d && !(d == 0 && t.Temperature == 1) {
			p.Temperature = ptr(t.Temperature)
		}
		set.Presets[name] = p
	}
	switch {
	case def != "":
		set.DefaultPreset = def
	case set.DefaultPreset == "" && man.Settings == nil:
		set.DefaultPreset = "fast"
		if _, ok := set.Presets["fast"]; !ok && len(names) > 0 {
			set.DefaultPreset = names[0]
		}
	}
	check := *man
	check.Settings = set
	if err := check.Validate(); err != nil {
		return nil, err
	}
	if err := CheckSettings(&check); err != nil {
		return nil, err
	}
	return set, nil
}
