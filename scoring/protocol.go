package scoring

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"marspec/api"
	"marspec/diffusion"
	"marspec/generation"
	"marspec/mar"
)

// ProtocolMAR is MAR's published evaluation (algorithm notes §10): 50 images per class over
// the pack's classes, sampled with the pack's paper-evaluation preset (its manifest's
// evaluation_preset: for MAR-B num_iter 256, 100 ddpm steps, cfg 2.9 on the linear schedule,
// temperature 1.0), scored by the Inception evaluator against ADM's reference batch.
const ProtocolMAR = "mar"

// ProtocolImagesPerClass is the protocol's count per class: 50,000 images over 1,000 classes.
const ProtocolImagesPerClass = 50

// Protocol is a protocol resolved against one pack: the run settings it pins and what it
// prints.
type Protocol struct {
	Name, Pack, Preset, Provenance string
	Full                           int         // images of the full protocol: 50 per class
	Options                        mar.Options // what every image samples with
	Sampler                        string
}

// ResolveProtocol fills s (N unless nGiven, CFG, CFGSchedule, Temperature, Steps and the one
// configuration) from the pack's evaluation preset, checked as a request on the pack is.
// Settings the protocol fixes must not be given otherwise: given names the eval flags set
// on the command line, and each such flag is refused by name.
func ResolveProtocol(name string, man *mar.Manifest, pack string, s *Settings, nGiven bool, given []string) (Protocol, error) {
	p := Protocol{Name: name, Pack: pack}
	if name != ProtocolMAR {
		return p, fmt.Errorf("--protocol %q unknown (allowed: %s)", name, ProtocolMAR)
	}
	for _, f := range given {
		switch f {
		case "cfg", "temperature", "steps", "configs", "draft":
			return p, fmt.Errorf("--%s: protocol %s takes every sampling setting from the pack's evaluation preset; omit --%s, or run without --protocol", f, name, f)
		}
	}
	set := man.Settings
	if set == nil || set.EvaluationPreset == "" {
		return p, fmt.Errorf("--protocol %s: pack %s has no evaluation_preset in its manifest's settings (scripts/packs/export_mar.py writes MAR's published one; docs/model-pack.md)", name, pack)
	}
	p.Preset = set.EvaluationPreset
	pre := set.Presets[p.Preset]
	p.Provenance = pre.Provenance
	if pre.Mode != generation.ModeTarget {
		return p, fmt.Errorf("--protocol %s: the evaluation preset %s of pack %s runs mode %s; the protocol samples the target alone", name, p.Preset, pack, pre.Mode)
	}
	var zero uint64
	plan, err := generation.Validate(api.GenerateRequest{Class: api.Classes{"0"}, Seed: &zero, Preset: p.Preset},
		generation.Catalog{TargetPack: pack, Target: man})
	if err != nil {
		return p, fmt.Errorf("--protocol %s: the evaluation preset %s of pack %s: %w", name, p.Preset, pack, err)
	}
	if plan.Preset != p.Preset { // a fallback would change what the protocol runs
		return p, fmt.Errorf("--protocol %s: the evaluation preset %s does not fit pack %s (it would run %s)", name, p.Preset, pack, plan.Preset)
	}
	o := plan.Options
	p.Options, p.Sampler = o, string(o.Sampler)
	p.Full = ProtocolImagesPerClass * len(man.Classes)
	if !nGiven {
		s.N = p.Full
	}
	s.Protocol, s.Preset = name, p.Preset
	s.CFG, s.CFGSchedule, s.Temperature, s.Steps = o.CFG, o.CFGSchedule, o.Temperature, o.Steps
	s.Configs = []string{protocolConfig(o)}
	return p, nil
}

// protocolConfig is the run configuration of the target sampling with o: every setting the
// shared ones (cfg, temperature, steps) do not carry, spelled out.
func protocolConfig(o mar.Options) string {
	c := "target:num_iter=" + strconv.Itoa(o.NumIter)
	if o.Sampler != diffusion.DDPM {
		c += ":sampler=" + string(o.Sampler)
		if o.Sampler.HasEta() {
			c += ":eta=" + strconv.FormatFloat(o.Eta, 'g', -1, 64)
		}
	}
	if o.StepsLate > 0 {
		c += ":anneal=" + strconv.Itoa(o.StepsLate)
	}
	if !o.FinalStepNoise {
		c += ":final_noise=off"
	}
	return c
}

// Print states every setting the run samples and scores with, and, below the protocol's 50
// images per class, that its FID is a first look.
func (p Protocol) Print(w io.Writer, s Settings, evaluator, reference string) {
	o := p.Options
	fmt.Fprintf(w, "protocol %s on pack %s: preset %s [%s]\n", p.Name, p.Pack, p.Preset, p.Provenance)
	fmt.Fprintf(w, "  num_iter %d, %s in %d steps, cfg %g (%s schedule), temperature %g, final step noise %v, seed %d\n",
		o.NumIter, p.Sampler, o.Steps, o.CFG, o.CFGSchedule, o.Temperature, o.FinalStepNoise, s.Seed)
	fmt.Fprintf(w, "  %d images, classes cycling 0..%d; evaluator %s, reference %s\n", s.N, p.Full/ProtocolImagesPerClass-1, evaluator, reference)
	switch {
	case s.N < p.Full:
		fmt.Fprintf(w, "  first look: %d of the protocol's %d images (%d per class). FID is biased upward at small N and\n"+
			"  not comparable with a published FID-50k; its noise floor at this N is the FID between two runs that\n"+
			"  differ only in --seed (make one more with another --seed and --out, and compare).\n", s.N, p.Full, ProtocolImagesPerClass)
	case s.N%(p.Full/ProtocolImagesPerClass) != 0:
		fmt.Fprintf(w, "  %d images are not a whole number per class; the protocol's %d are\n", s.N, p.Full)
	}
	if !strings.Contains(strings.ToLower(evaluator), "inception") {
		fmt.Fprintf(w, "  note: the protocol scores with the Inception evaluator (scripts/packs/export_inception.py) against ADM's reference batch; %s is another evaluator\n", evaluator)
	}
}

// ApplyProtocol is eval --protocol: it needs --evaluator and --reference given, resolves the
// protocol against the target pack (ResolveProtocol; given names the flags set on the command
// line), samples the target alone (no draft pack is opened), and prints every setting on w
// before anything runs.
func ApplyProtocol(name string, s *Settings, given []string, evaluator, reference string, w io.Writer) error {
	set := map[string]bool{}
	for _, f := range given {
		set[f] = true
	}
	switch {
	case !set["evaluator"]:
		return fmt.Errorf("--evaluator: protocol %s scores with the Inception evaluator (scripts/packs/export_inception.py); give its folder", name)
	case !set["reference"]:
		return fmt.Errorf("--reference: protocol %s scores against ADM's reference batch (VIRTUAL_imagenet256_labeled.npz); give it", name)
	}
	p, err := generation.LoadPack(s.Target)
	if err != nil {
		return err
	}
	proto, err := ResolveProtocol(name, p.Manifest, s.Target, s, set["n"], given)
	if err != nil {
		return err
	}
	s.Draft = s.Target
	proto.Print(w, *s, evaluator, reference)
	return nil
}
