package server

import (
	"encoding/json"
	"fmt"
	"strings"

	"marspec/generation"
)

// servedOpenAPI is openapi.json with the running pack's settings filled in: the request's
// preset names (an enum) and default preset, and the defaults of cfg, cfg_schedule,
// temperature, num_iter and steps, which come from the target pack's manifest
// (generation.WireModels), not from this binary. The file itself states the built-in ones.
func servedOpenAPI(cat generation.Catalog) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		return nil, err
	}
	props, ok := dig(doc, "components", "schemas", "GenerateRequest", "properties")
	if !ok {
		return nil, fmt.Errorf("openapi.json: no GenerateRequest properties")
	}
	m := generation.WireModels(cat)
	preset, _ := props["preset"].(map[string]any)
	if preset != nil && len(m.Presets) > 0 {
		preset["enum"] = m.Presets
		about := make([]string, 0, len(m.Presets))
		for _, name := range m.Presets {
			about = append(about, name+": "+m.PresetAbout[name]+" ["+m.PresetInfo[name].Provenance+"]")
		}
		preset["description"] = fmt.Sprintf("%v The presets of this server's pack %s (its manifest's): %s.",
			preset["description"], m.PresetsOf, strings.Join(about, "; "))
		if m.DefaultPreset != "" {
			preset["default"] = m.DefaultPreset
		}
	}
	if len(m.Models) > 0 && m.Models[0].Defaults != nil {
		d := m.Models[0].Defaults
		for field, v := range map[string]any{"cfg": d.CFG, "cfg_schedule": d.CFGSchedule, "temperature": d.Temperature,
			"num_iter": d.NumIter, "steps": d.Steps, "sampler": d.Sampler} {
			if p, ok := props[field].(map[string]any); ok {
				p["default"] = v
			}
		}
		if info, ok := dig(doc, "info"); ok {
			info["x-pack-defaults"] = fmt.Sprintf("pack %s: %s (where a request's preset sets nothing)", m.Models[0].Name, d.Provenance)
		}
	}
	return json.MarshalIndent(doc, "", "  ")
}

// dig returns the object at path in a decoded JSON document.
func dig(doc map[string]any, path ...string) (map[string]any, bool) {
	cur := doc
	for _, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}
