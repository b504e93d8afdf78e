package scoring

import (
	"bytes"
	"strings"
	"testing"

	"marspec/generation"
	"marspec/mar"
)

// The protocol takes every sampling setting from the pack's evaluation preset, checked as a
// request on the pack, pins them in the run's settings, and refuses what would change them.
func TestResolveProtocol(t *testing.T) {
	_, cat := generation.TestModels()
	man := *cat.Target
	cfg, temp := 2.9, 1.0
	man.Settings = &mar.Settings{DefaultPreset: "paper", EvaluationPreset: "paper",
		Defaults: mar.Defaults{CFG: 1, Provenance: "published: test"},
		Presets: map[string]mar.Preset{"paper": {Mode: "target", NumIter: 6, Steps: 8, CFG: &cfg, CFGSchedule: "linear",
			Temperature: &temp, About: "paper", Provenance: "published: test"}}}
	s := Settings{N: 2000, Seed: 1, CFG: 1, Temperature: 1}
	p, err := ResolveProtocol(ProtocolMAR, &man, "pack", &s, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{N: 150, Seed: 1, CFG: 2.9, CFGSchedule: "linear", Temperature: 1, Steps: 8,
		Configs: []string{"target:num_iter=6:final_noise=off"}, Protocol: "mar", Preset: "paper"}
	if s.N != want.N || s.CFG != want.CFG || s.CFGSchedule != want.CFGSchedule || s.Temperature != want.Temperature ||
		s.Steps != want.Steps || strings.Join(s.Configs, ",") != want.Configs[0] || s.Protocol != "mar" || s.Preset != "paper" {
		t.Fatalf("settings %+v, want %+v (50 images for each of the 3 classes)", s, want)
	}
	var out bytes.Buffer
	p.Print(&out, s, "evaluators/inception", "ref.npz")
	if !strings.Contains(out.String(), "num_iter 6, ddpm in 8 steps, cfg 2.9 (linear schedule), temperature 1") || strings.Contains(out.String(), "first look") {
		t.Errorf("printed:\n%s", out.String())
	}
	s = Settings{N: 30}
	p, _ = ResolveProtocol(ProtocolMAR, &man, "pack", &s, true, []string{"n"})
	out.Reset()
	p.Print(&out, s, "evaluators/inception", "ref.npz")
	if s.N != 30 || !strings.Contains(out.String(), "first look: 30 of the protocol's 150 images") {
		t.Errorf("a smaller --n: N %d, printed:\n%s", s.N, out.String())
	}
	for name, c := range map[string]struct {
		protocol string
		man      *mar.Manifest
		given    []string
		want     string
	}{
		"unknown":       {"adm", &man, nil, `--protocol "adm" unknown (allowed: mar)`},
		"--cfg given":   {ProtocolMAR, &man, []string{"n", "cfg"}, "--cfg: protocol mar takes every sampling setting"},
		"--configs":     {ProtocolMAR, &man, []string{"configs"}, "--configs: protocol mar"},
		"no evaluation": {ProtocolMAR, cat.Target, nil, "has no evaluation_preset"},
	} {
		s := Settings{N: 2000}
		if _, err := ResolveProtocol(c.protocol, c.man, "pack", &s, false, c.given); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
