package mar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Settings is the manifest's optional "settings" entry (docs/model-pack.md, "Settings"): what
// this pack was published or measured to sample best with. Defaults are where every request's
// unset sampling fields start; presets are named bundles over them. Each carries its
// provenance, so a reader knows whether a value was published, measured or derived.
// The values are checked against the pack by package generation (CheckSettings), which owns
// the rules of a request; this file checks the entry's shape.
type Settings struct {
	Defaults Defaults `json:"defaults"`
	// DefaultPreset is what a request naming neither preset nor mode runs with ("" = none:
	// speculative decoding with its built-in settings).
	DefaultPreset string `json:"default_preset,omitempty"`
	// EvaluationPreset reproduces the pack's published evaluation (marspec eval --protocol).
	EvaluationPreset string            `json:"evaluation_preset,omitempty"`
	Presets          map[string]Preset `json:"presets,omitempty"`
	// Derived is set (never read from a manifest) on the settings generation.PackSettings
	// makes for a pack whose manifest has none; Provenance says how they were derived.
	Derived bool `json:"-"`
}

// Defaults are the sampling settings a request starts from, before its preset and its own
// fields; a zero value has the meaning given per field.
type Defaults struct {
	NumIter     int      `json:"num_iter"`          // AR steps; 0 = one token per step
	Steps       int      `json:"steps"`             // diffusion steps; 0 = diffusion.sampling_steps
	Sampler     string   `json:"sampler,omitempty"` // head sampler; "" = ddpm
	Eta         *float64 `json:"eta,omitempty"`     // ddim only; nil = the sampler's default
	CFG         float64  `json:"cfg"`               // classifier-free guidance; 1 = off
	CFGSchedule string   `json:"cfg_schedule"`      // linear or constant
	Temperature float64  `json:"temperature"`       // scales the diffusion head's noise
	Provenance  string   `json:"provenance"`        // where these values come from
}

// Preset is a named bundle of settings. Fields a request sets explicitly win over the
// preset's; a request's mode must agree with the preset's.
type Preset struct {
	Mode      string `json:"mode"`                 // target, draft or spec
	NumIter   int    `json:"num_iter,omitempty"`   // target/draft modes; 0 = the defaults'
	Steps     int    `json:"steps,omitempty"`      // diffusion steps; 0 = the defaults'
	StepsLate int    `json:"steps_late,omitempty"` // diffusion steps of the last AR step (annealing); 0 = off
	// Sampler and Eta choose the head sampler ("" = the defaults'; Eta nil = the sampler's
	// default). Steps go with the sampler: a request naming another sampler gets the pack's.
	Sampler     string   `json:"sampler,omitempty"`
	Eta         *float64 `json:"eta,omitempty"`
	CFG         *float64 `json:"cfg,omitempty"`          // nil = the defaults'
	CFGSchedule string   `json:"cfg_schedule,omitempty"` // "" = the defaults'
	Temperature *float64 `json:"temperature,omitempty"`  // nil = the defaults'
	// FinalStepNoise gives the last diffusion step its variance; false leaves the request's
	// default.
	FinalStepNoise bool `json:"final_step_noise,omitempty"`
	// Fallback is the preset a request runs with instead when this one's settings do not fit
	// it or its pack (a pack without a distilled head, a temperature the distilled head cannot
	// scale); the plan then names the fallback. "" = such a request is refused.
	Fallback string `json:"fallback,omitempty"`
	// Precision is what the preset was measured at where it is not fp32 (int8: the pack's
	// quantised graphs). A request naming none runs at it on a CPU server that serves it and a
	// pack that has the graphs; elsewhere at the server's default (the int8 graphs are measured
	// on CPUs only).
	Precision  string `json:"precision,omitempty"`
	Gamma      string `json:"gamma,omitempty"` // spec mode
	Verify     string `json:"verify,omitempty"`
	Acceptance string `json:"acceptance,omitempty"`
	About      string `json:"about"`      // what it runs and what it measured, one line
	Provenance string `json:"provenance"` // "published: ...", "measured: ..." or "derived: ..."
}

// PresetNames lists the presets in a stable order.
func (s *Settings) PresetNames() []string {
	return slices.Sorted(maps.Keys(s.Presets))
}

var presetName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// provenanceKinds are how a setting came to be, the first word of every provenance.
var provenanceKinds = []string{"published:", "measured:", "derived:", "chosen:"}

func checkProvenance(field, p string) error {
	for _, k := range provenanceKinds {
		if strings.HasPrefix(p, k) && len(strings.TrimSpace(strings.TrimPrefix(p, k))) > 0 {
			return nil
		}
	}
	return fmt.Errorf("%s %q: want %s followed by where the values come from", field, p, strings.Join(provenanceKinds, ", "))
}

func (s *Settings) validate() error {
	if err := checkProvenance("settings defaults provenance", s.Defaults.Provenance); err != nil {
		return err
	}
	for _, name := range s.PresetNames() {
		p := s.Presets[name]
		field := "settings preset " + name
		if !presetName.MatchString(name) {
			return fmt.Errorf("settings preset name %q: want 1 to 32 of a-z, 0-9, - and _, starting with a letter or digit", name)
		}
		if err := checkProvenance(field+" provenance", p.Provenance); err != nil {
			return err
		}
		if p.About == "" {
			return errors.New(field + ": about is missing (one line saying what it runs)")
		}
		seen := map[string]bool{name: true}
		for fb := p.Fallback; fb != ""; fb = s.Presets[fb].Fallback {
			if _, ok := s.Presets[fb]; !ok {
				return fmt.Errorf("%s: fallback %q is not a preset of this pack (allowed: %s)", field, fb, strings.Join(s.PresetNames(), ", "))
			}
			if seen[fb] {
				return fmt.Errorf("%s: fallback %q leads back to a preset already on its path", field, fb)
			}
			seen[fb] = true
		}
	}
	for field, name := range map[string]string{"default_preset": s.DefaultPreset, "evaluation_preset": s.EvaluationPreset} {
		if _, ok := s.Presets[name]; name != "" && !ok {
			return fmt.Errorf("settings %s %q is not a preset of this pack (allowed: %s)", field, name, strings.Join(s.PresetNames(), ", "))
		}
	}
	return nil
}

// WriteSettings replaces the "settings" entry of dir/manifest.json with set (adding it last
// when absent), keeping every other entry as written, in its order, and checks the result as
// a manifest. The file is replaced only when the whole manifest is valid.
func WriteSettings(dir string, set *Settings) error {
	file := filepath.Join(dir, "manifest.json")
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("model pack %s: cannot read manifest.json: %v", dir, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("%s: not a JSON object", file)
	}
	var keys []string
	values := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s: %v", file, err)
		}
		key := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("%s: %v", file, err)
		}
		if _, dup := values[key]; !dup {
			keys = append(keys, key)
		}
		values[key] = v
	}
	encoded, err := json.Marshal(set)
	if err != nil {
		return err
	}
	if _, ok := values["settings"]; !ok {
		keys = append(keys, "settings")
	}
	values["settings"] = encoded
	var out bytes.Buffer
	out.WriteString("{\n")
	for i, k := range keys {
		name, _ := json.Marshal(k)
		out.WriteString("  ")
		out.Write(name)
		out.WriteString(": ")
		if err := json.Indent(&out, values[k], "  ", "  "); err != nil {
			return fmt.Errorf("%s: %s: %v", file, k, err)
		}
		if i < len(keys)-1 {
			out.WriteString(",")
		}
		out.WriteString("\n")
	}
	out.WriteString("}\n")
	if _, err := ParseManifest(out.Bytes(), file); err != nil {
		return err
	}
	return os.WriteFile(file, out.Bytes(), 0o644)
}
