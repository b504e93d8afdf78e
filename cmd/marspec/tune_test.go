package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/mar"
)

// The embedded target's presets are what `marspec tune` writes from the committed frontier
// runs: run on a copy of its manifest, the tool gives back the committed file byte for byte
// (the same values, about lines and provenance; every other entry untouched).
func TestTuneRegeneratesTheEmbeddedPresets(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	want, err := os.ReadFile(filepath.Join("models", "target", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	pack := t.TempDir()
	if err := os.WriteFile(filepath.Join(pack, "manifest.json"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	runs := "docs/results/2026-11-27-int8-per-row/cfg1-seed1,docs/results/2026-11-27-int8-per-row/cfg1-seed2,docs/results/2026-11-27-int8-per-row/cfg1-seed3"
	speed := "docs/results/2026-11-27-int8-per-row/speed-cfg1,docs/results/2026-11-27-int8-per-row/speed2-cfg1"
	if err := runTune([]string{"--pack", pack, "--runs", runs, "--speed", speed}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(pack, "manifest.json"))
	if !bytes.Equal(got, want) {
		t.Fatalf("tune wrote another manifest than models/target/manifest.json:\n%s", got)
	}
	// a preset whose provenance is published is not replaced without the flag
	man, err := mar.LoadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	fast := man.Settings.Presets["fast"]
	fast.Provenance = "published: a paper's setting"
	man.Settings.Presets["fast"] = fast
	if err := mar.WriteSettings(pack, man.Settings); err != nil {
		t.Fatal(err)
	}
	err = runTune([]string{"--pack", pack, "--runs", runs, "--speed", speed})
	if err == nil || !strings.Contains(err.Error(), "preset fast of pack fmnist-target is published (published: a paper's setting): tuning does not replace it without --replace-published") {
		t.Fatalf("replacing a published preset: %v", err)
	}
	if err := runTune([]string{"--pack", pack, "--runs", runs, "--speed", speed, "--replace-published"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(pack, "manifest.json")); !bytes.Equal(got, want) {
		t.Errorf("with --replace-published the measured preset must replace the published one")
	}
}

// A pack without settings gets the tuned presets over the built-in defaults, fast its default;
// a run's guidance other than the defaults' is carried by each preset.
func TestTuneAPackWithoutSettings(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	raw, err := os.ReadFile(filepath.Join("models", "draft", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	pack := t.TempDir()
	if err := os.WriteFile(filepath.Join(pack, "manifest.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	runs := "docs/results/2026-11-25-head-samplers/cfg3-seed1,docs/results/2026-11-25-head-samplers/cfg3-seed2,docs/results/2026-11-25-head-samplers/cfg3-seed3"
	err = runTune([]string{"--pack", pack, "--runs", runs})
	// the draft pack has no distilled head: fast (distilled) needs its fallback, which exists
	if err != nil {
		t.Fatal(err)
	}
	man, err := mar.LoadManifest(pack)
	if err != nil {
		t.Fatal(err)
	}
	s := man.Settings
	if s == nil || s.DefaultPreset != "fast" || len(s.Presets) != 3 || !strings.HasPrefix(s.Defaults.Provenance, "chosen: marspec's built-in defaults") {
		t.Fatalf("settings: %+v", s)
	}
	for name, p := range s.Presets {
		if p.CFG == nil || *p.CFG != 3 || !strings.HasPrefix(p.Provenance, "measured: frontier runs docs/results/2026-11-25-head-samplers/cfg3-seed1") {
			t.Errorf("%s: cfg %v, provenance %q; want cfg 3 (the runs') and the runs named", name, p.CFG, p.Provenance)
		}
	}
}
