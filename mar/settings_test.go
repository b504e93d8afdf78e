package mar

import (
	"strings"
	"testing"
)

// The settings entry's shape is checked when a manifest is read: every value says where it
// comes from, and the names it refers to are presets of the pack.
func TestSettingsShape(t *testing.T) {
	good := func() *Settings {
		return &Settings{DefaultPreset: "a", EvaluationPreset: "b",
			Defaults: Defaults{CFG: 1, Provenance: "published: x"},
			Presets: map[string]Preset{
				"a": {Mode: "target", Fallback: "b", About: "a", Provenance: "measured: run r, rule q"},
				"b": {Mode: "target", About: "b", Provenance: "derived: y"},
			}}
	}
	if err := good().validate(); err != nil {
		t.Fatalf("good settings: %v", err)
	}
	for name, c := range map[string]struct {
		edit func(*Settings)
		want string
	}{
		"no provenance":   {func(s *Settings) { s.Defaults.Provenance = "" }, "defaults provenance"},
		"bare kind":       {func(s *Settings) { p := s.Presets["a"]; p.Provenance = "published: "; s.Presets["a"] = p }, "preset a provenance"},
		"unknown kind":    {func(s *Settings) { p := s.Presets["b"]; p.Provenance = "guessed: z"; s.Presets["b"] = p }, "preset b provenance"},
		"no about":        {func(s *Settings) { p := s.Presets["b"]; p.About = ""; s.Presets["b"] = p }, "about is missing"},
		"default unknown": {func(s *Settings) { s.DefaultPreset = "c" }, `default_preset "c" is not a preset of this pack (allowed: a, b)`},
		"eval unknown":    {func(s *Settings) { s.EvaluationPreset = "c" }, `evaluation_preset "c"`},
		"fallback":        {func(s *Settings) { p := s.Presets["b"]; p.Fallback = "c"; s.Presets["b"] = p }, `fallback "c" is not a preset`},
		"fallback cycle":  {func(s *Settings) { p := s.Presets["b"]; p.Fallback = "a"; s.Presets["b"] = p }, "leads back"},
		"name":            {func(s *Settings) { s.Presets["Bad Name"] = Preset{Mode: "target", About: "x", Provenance: "chosen: x"} }, `name "Bad Name"`},
	} {
		s := good()
		c.edit(s)
		if err := s.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}
