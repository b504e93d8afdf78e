package generation

import (
	"errors"
	"strings"
	"testing"

	"marspec/api"
	"marspec/mar"
)

// marLikeSettings are settings shaped as scripts/packs/export_mar.py writes them for MAR-B: defaults
// at the paper's evaluation values, a 64-step preset and an unguided one.
func marLikeSettings() *mar.Settings {
	set := testSettings("paper", map[string]Preset{
		"paper":    {Mode: ModeTarget, NumIter: 6, Steps: 8, CFG: f64(2.9), CFGSchedule: "linear", Temperature: f64(1)},
		"speed":    {Mode: ModeTarget, NumIter: 2, Steps: 8, CFG: f64(2.9), CFGSchedule: "linear", Temperature: f64(1)},
		"unguided": {Mode: ModeTarget, NumIter: 6, Steps: 8, CFG: f64(1), Temperature: f64(0.95)},
	})
	set.Defaults = mar.Defaults{NumIter: 6, Steps: 8, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, Provenance: "published: test"}
	set.EvaluationPreset = "paper"
	return set
}

// A request resolves its preset against the pack it runs on: the pack's default preset and
// its guidance and temperature reach the plan, explicit fields still win, and a preset the
// pack lacks is a 400 naming the pack's presets (not the embedded pack's).
func TestPresetsBelongToThePack(t *testing.T) {
	_, cat := TestModels()
	cat = withSettings(cat, marLikeSettings())
	p, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}}, cat)
	if err != nil || p.Preset != "paper" || p.Mode != ModeTarget || p.Options.CFG != 2.9 || p.Options.CFGSchedule != "linear" ||
		p.Options.Temperature != 1 || p.Options.NumIter != 6 || p.Options.Steps != 8 {
		t.Fatalf("default request: preset %q %+v %v, want paper's cfg 2.9, 6 AR steps, 8 diffusion steps", p.Preset, p.Options, err)
	}
	p, err = Validate(api.GenerateRequest{Class: api.Classes{"0"}, Preset: "unguided"}, cat)
	if err != nil || p.Options.CFG != 1 || p.Options.Temperature != 0.95 {
		t.Fatalf("unguided: %+v %v", p.Options, err)
	}
	p, err = Validate(api.GenerateRequest{Class: api.Classes{"0"}, Preset: "speed", CFG: f64(4), Temperature: f64(0.9)}, cat)
	if err != nil || p.Options.CFG != 4 || p.Options.Temperature != 0.9 || p.Options.NumIter != 2 {
		t.Fatalf("explicit cfg and temperature must win over the preset's: %+v %v", p.Options, err)
	}
	// mode target without a preset starts from the pack's defaults, not the built-in cfg 1
	p, err = Validate(api.GenerateRequest{Class: api.Classes{"0"}, Mode: ModeTarget}, cat)
	if err != nil || p.Preset != "" || p.Options.CFG != 2.9 || p.Options.NumIter != 6 || p.Options.Steps != 8 {
		t.Fatalf("mode target, no preset: %+v %v, want the pack's defaults", p.Options, err)
	}
	// spec mode decodes one token per step whatever the defaults' num_iter
	if p, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Mode: ModeSpec}, cat); err != nil || p.Options.NumIter != 6 || p.Options.CFG != 2.9 {
		t.Fatalf("spec mode on the pack: %+v %v", p.Options, err)
	}
	_, err = Validate(api.GenerateRequest{Class: api.Classes{"0"}, Preset: "fast"}, cat)
	var fe *FieldError
	if Field(err) != "preset" || !errors.As(err, &fe) || fe.Allowed != "paper, speed, unguided" || !strings.Contains(fe.Reason, "pack target") {
		t.Fatalf("a preset the pack lacks: %v, want a 400 on preset allowing paper, speed, unguided", err)
	}
	// the draft pack, without settings, keeps the built-in defaults in draft mode
	if p, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Mode: ModeDraft}, cat); err != nil || p.Options.CFG != 1 || p.Options.NumIter != 6 {
		t.Fatalf("draft mode: %+v %v", p.Options, err)
	}
}

// A pack without settings (an older manifest) gets the embedded pack's, AR steps scaled to its
// token count, each provenance saying so; a pack of the embedded pack's 49 tokens gets the
// same numbers.
func TestDerivedSettings(t *testing.T) {
	src, srcL := embeddedSettings()
	big := DeriveSettings(src, srcL, 256)
	if !big.Derived || big.DefaultPreset != src.DefaultPreset {
		t.Fatalf("derived: %+v", big)
	}
	for name, want := range map[string]int{"balanced": 16, "quality": 21, "fast": 16} {
		if got := big.Presets[name].NumIter; got != want {
			t.Errorf("%s at 256 tokens: num_iter %d, want %d (%d of %d scaled)", name, got, want, src.Presets[name].NumIter, srcL)
		}
		if p := big.Presets[name]; !strings.HasPrefix(p.Provenance, "derived:") || !strings.Contains(p.Provenance, "256 tokens") ||
			p.Steps != src.Presets[name].Steps || p.Sampler != src.Presets[name].Sampler {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if !strings.HasPrefix(big.Defaults.Provenance, "derived:") || big.Defaults.NumIter != 0 || big.Defaults.CFG != src.Defaults.CFG {
		t.Errorf("derived defaults: %+v", big.Defaults)
	}
	same := DeriveSettings(src, srcL, srcL)
	for name, p := range src.Presets {
		if same.Presets[name].NumIter != p.NumIter {
			t.Errorf("%s at %d tokens: num_iter %d, want %d", name, srcL, same.Presets[name].NumIter, p.NumIter)
		}
	}
	// a manifest without settings resolves against the derived ones
	man := &mar.Manifest{}
	man.Grid.Height, man.Grid.Width = 16, 16
	if got := PackSettings(man); !got.Derived || got.Presets["balanced"].NumIter != 16 {
		t.Errorf("PackSettings of a 256-token pack without settings: %+v", got.Presets["balanced"])
	}
}

// A manifest's settings are checked as requests use them, when the pack is read.
func TestCheckSettings(t *testing.T) {
	_, cat := TestModels()
	if err := CheckSettings(withSettings(cat, marLikeSettings()).Target); err != nil {
		t.Fatalf("good settings refused: %v", err)
	}
	if err := CheckSettings(cat.Draft); err != nil {
		t.Fatalf("derived settings refused: %v", err)
	}
	for name, c := range map[string]struct {
		edit func(*mar.Settings)
		want string
	}{
		"cfg 60":         {func(s *mar.Settings) { p := s.Presets["paper"]; p.CFG = f64(60); s.Presets["paper"] = p }, "preset paper: cfg 60"},
		"temperature 0":  {func(s *mar.Settings) { s.Defaults.Temperature = 0.01 }, "defaults: temperature 0.01"},
		"num_iter 7":     {func(s *mar.Settings) { p := s.Presets["speed"]; p.NumIter = 7; s.Presets["speed"] = p }, "preset speed: num_iter 7"},
		"mode":           {func(s *mar.Settings) { p := s.Presets["speed"]; p.Mode = "fast"; s.Presets["speed"] = p }, `mode "fast" unknown`},
		"spec num_iter":  {func(s *mar.Settings) { p := s.Presets["speed"]; p.Mode = ModeSpec; s.Presets["speed"] = p }, "apply to modes target and draft only"},
		"gamma":          {func(s *mar.Settings) { p := s.Presets["speed"]; p.Gamma = "4"; s.Presets["speed"] = p }, "apply to mode spec only"},
		"distilled":      {func(s *mar.Settings) { p := s.Presets["speed"]; p.Sampler = "distilled"; s.Presets["speed"] = p }, "has no distilled_head"},
		"cfg_schedule x": {func(s *mar.Settings) { s.Defaults.CFGSchedule = "x" }, "defaults: cfg_schedule"},
	} {
		set := marLikeSettings()
		c.edit(set)
		err := CheckSettings(withSettings(cat, set).Target)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
	// a preset that does not fit the pack is allowed when it has a fallback that does
	set := marLikeSettings()
	p := set.Presets["speed"]
	p.Sampler, p.Fallback = "distilled", "paper"
	set.Presets["speed"] = p
	if err := CheckSettings(withSettings(cat, set).Target); err != nil {
		t.Errorf("a preset with a fallback: %v", err)
	}
}

// GET /v1/models' body shows the running pack's presets, their provenance and its defaults.
func TestWireModelsShowThePacksSettings(t *testing.T) {
	_, cat := TestModels()
	cat = withSettings(cat, marLikeSettings())
	m := WireModels(cat)
	if strings.Join(m.Presets, ",") != "paper,speed,unguided" || m.DefaultPreset != "paper" || m.PresetsOf != "target" ||
		!m.PresetInfo["paper"].Evaluation || m.PresetInfo["speed"].Evaluation || m.PresetInfo["unguided"].Provenance != "chosen: test" {
		t.Fatalf("models: %+v", m)
	}
	d := m.Models[0].Defaults
	if d == nil || d.CFG != 2.9 || d.NumIter != 6 || d.Steps != 8 || d.Sampler != "ddpm" || d.Provenance != "published: test" {
		t.Fatalf("target defaults: %+v", d)
	}
	if d := m.Models[1].Defaults; d == nil || d.CFG != 1 || !strings.HasPrefix(d.Provenance, "derived:") {
		t.Fatalf("draft defaults: %+v", d)
	}
	// a client rebuilds the modes from the wire and resolves as the server does
	set := SettingsFromWire(&m)
	if mode, preset, _, err := ResolveMode(Request{}, set, m.PresetsOf); err != nil || mode != ModeTarget || preset != "paper" || set.EvaluationPreset != "paper" {
		t.Fatalf("from the wire: %q %q %v", mode, preset, err)
	}
}
