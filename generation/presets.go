package generation

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"sync"

	"marspec/api"
	"marspec/diffusion"
	"marspec/mar"
	"marspec/models"
)

// Preset is a named bundle of settings. Presets belong to a pack: its manifest's "settings"
// entry holds them with its defaults, each with its provenance (mar.Settings,
// docs/model-pack.md). The code here holds the rules that resolve and check them.
type Preset = mar.Preset

func ptr[T any](v T) *T { return &v }

// PackSettings returns the settings requests on a pack resolve against: its manifest's, or,
// for a pack whose manifest has none (older packs), the embedded target's scaled to the pack's
// token count (DeriveSettings). A nil manifest gets the embedded target's.
func PackSettings(man *mar.Manifest) *mar.Settings {
	if man != nil && man.Settings != nil {
		return man.Settings
	}
	src, srcL := embeddedSettings()
	if man == nil {
		return src
	}
	return DeriveSettings(src, srcL, man.SeqLen())
}

var embedded struct {
	once     sync.Once
	settings *mar.Settings
	seqLen   int
}

// embeddedSettings are the embedded target pack's settings and its token count, read once.
func embeddedSettings() (*mar.Settings, int) {
	embedded.once.Do(func() {
		raw, err := fs.ReadFile(models.FS, "target/manifest.json")
		if err != nil {
			panic("embedded target manifest: " + err.Error()) // the build embeds it
		}
		man, err := mar.ParseManifest(raw, "embedded/target/manifest.json")
		if err != nil || man.Settings == nil {
			panic(fmt.Sprintf("embedded target manifest: settings missing or invalid: %v", err))
		}
		embedded.settings, embedded.seqLen = man.Settings, man.SeqLen()
	})
	return embedded.settings, embedded.seqLen
}

// EmbeddedSettings are the embedded target pack's settings: what a pack without settings of
// its own derives from, and what the documentation of the embedded pair states.
func EmbeddedSettings() *mar.Settings {
	s, _ := embeddedSettings()
	return s
}

// DeriveSettings scales src, the settings of a pack of srcL tokens, to a pack of L tokens: each
// preset's AR steps keep their share of the tokens (rounded, at least 1); the diffusion steps,
// sampler and guidance are kept. The result says so in every provenance: it was not measured
// on the pack.
func DeriveSettings(src *mar.Settings, srcL, L int) *mar.Settings {
	out := &mar.Settings{Derived: true, DefaultPreset: src.DefaultPreset, EvaluationPreset: src.EvaluationPreset,
		Defaults: src.Defaults, Presets: map[string]Preset{}}
	out.Defaults.NumIter = scaleIter(src.Defaults.NumIter, srcL, L)
	what := describeSettings(src.Defaults.NumIter, src.Defaults.Steps, src.Defaults.Sampler, src.Defaults.Eta)
	out.Defaults.Provenance = fmt.Sprintf("derived: the embedded pack's defaults (%s), unchanged; not measured on this pack", what)
	if src.Defaults.NumIter > 0 && srcL != L {
		out.Defaults.Provenance = fmt.Sprintf("derived: the embedded pack's defaults (%s), AR steps scaled from %d to %d tokens; not measured on this pack", what, srcL, L)
	}
	for name, p := range src.Presets {
		q := p
		q.NumIter = scaleIter(p.NumIter, srcL, L)
		q.About = DescribePreset(q) + fmt.Sprintf(" (the embedded pack's %s; speed and quality not measured on this pack)", name)
		q.Provenance = fmt.Sprintf("derived: the embedded pack's %s preset, unchanged (it sets no AR steps); not measured on this pack", name)
		if p.NumIter > 0 {
			q.About = DescribePreset(q) + fmt.Sprintf(" (the embedded pack's %s scaled to %d tokens; speed and quality not measured on this pack)", name, L)
			q.Provenance = fmt.Sprintf("derived: the embedded pack's %s preset (num_iter %d of its %d tokens), AR steps scaled to this pack's %d tokens; not measured on this pack",
				name, p.NumIter, srcL, L)
		}
		out.Presets[name] = q
	}
	return out
}

func scaleIter(n, srcL, L int) int {
	if n <= 0 || srcL == L {
		return n
	}
	return min(L, max(1, int(math.Round(float64(n)*float64(L)/float64(srcL)))))
}

// DescribePreset says in a few words what a preset runs.
func DescribePreset(p Preset) string {
	if p.Mode == ModeSpec {
		return "speculative decoding, " + pick(p.Verify, "", "prefix") + " verification, " + pick(p.Acceptance, "", "paper") + " criterion"
	}
	s := p.Mode + " alone, " + describeSettings(p.NumIter, p.Steps, p.Sampler, p.Eta)
	if p.CFG != nil {
		s += ", cfg " + strconv.FormatFloat(*p.CFG, 'g', -1, 64)
	}
	if p.Temperature != nil {
		s += ", temperature " + strconv.FormatFloat(*p.Temperature, 'g', -1, 64)
	}
	switch p.Precision {
	case "", mar.FP32:
	case mar.FP16:
		s += ", fp16 weights on CUDA"
	default:
		s += ", " + p.Precision + " weights on a CPU"
	}
	return s
}

func describeSettings(numIter, steps int, sampler string, eta *float64) string {
	s := "one token per AR step"
	if numIter > 0 {
		s = strconv.Itoa(numIter) + " AR steps"
	}
	head := pick(sampler, "", string(diffusion.DDPM))
	if eta != nil {
		head += " eta " + strconv.FormatFloat(*eta, 'g', -1, 64)
	}
	if steps == 1 {
		return s + ", " + head + " in 1 step"
	}
	if steps > 0 {
		return s + ", " + head + " in " + strconv.Itoa(steps) + " steps"
	}
	return s + ", " + head + " in the pack's steps"
}

// PresetAbout is one line per preset for listings: what it runs and where it comes from.
func PresetAbout(p Preset) string { return p.About + " [" + p.Provenance + "]" }

// lookupPreset finds a preset of the settings, or says which the pack has.
func lookupPreset(set *mar.Settings, name, pack string) (Preset, error) {
	if p, ok := set.Presets[name]; ok {
		return p, nil
	}
	allowed := strings.Join(set.PresetNames(), ", ")
	if allowed == "" {
		allowed = "none: the pack has no presets; omit it"
	}
	return Preset{}, fieldErr("preset", strconv.Quote(name), allowed, "not a preset of pack "+pack)
}

// CheckSettings checks a pack's settings as requests would use them: the defaults and every
// preset must pass a request's checks on this pack (a preset that does not fit must have a
// fallback), so a bad manifest fails when it is read, not at its first request.
func CheckSettings(man *mar.Manifest) error {
	set := PackSettings(man)
	var zero uint64
	seeded := Request{GenerateRequest: api.GenerateRequest{Seed: &zero}}
	if _, err := samplingOptions(seeded, man); err != nil {
		return fmt.Errorf("settings defaults: %v", err)
	}
	for _, name := range set.PresetNames() {
		pre := set.Presets[name]
		fail := func(err error) error { return fmt.Errorf("settings preset %s: %v", name, err) }
		switch pre.Mode {
		case ModeTarget, ModeDraft:
		case ModeSpec:
			if pre.NumIter != 0 || pre.StepsLate != 0 {
				return fail(errors.New("num_iter and steps_late apply to modes target and draft only"))
			}
			if _, _, err := specConfig(Request{}, pre, "cpu"); err != nil {
				return fail(err)
			}
		default:
			return fail(fmt.Errorf("mode %q unknown (allowed: target, draft, spec)", pre.Mode))
		}
		if _, err := mar.ParsePrecision(pre.Precision); err != nil {
			return fail(err)
		}
		if pre.Mode != ModeSpec && (pre.Gamma != "" || pre.Verify != "" || pre.Acceptance != "") {
			return fail(errors.New("gamma, verify and acceptance apply to mode spec only"))
		}
		req := withPreset(seeded, pre)
		if pre.Mode == ModeSpec {
			req.NumIter = ptr(0)
		}
		if _, err := samplingOptions(req, man); err != nil && pre.Fallback == "" {
			return fail(err)
		}
	}
	return nil
}

// WireModels describes a catalog's packs and the running pack's presets and defaults as GET
// /v1/models reports them (and the gallery, marspec models and the OpenAPI document show).
func WireModels(cat Catalog) api.Models {
	set, pack := cat.Settings()
	out := api.Models{Presets: set.PresetNames(), PresetsOf: pack, Modes: []string{ModeTarget, ModeDraft, ModeSpec},
		DefaultPreset: set.DefaultPreset, PresetAbout: map[string]string{}, PresetInfo: map[string]api.PresetInfo{},
		DefaultPrecision: pick(cat.Precision, "", mar.FP32)}
	for name, p := range set.Presets {
		out.PresetAbout[name] = p.About
		out.PresetInfo[name] = api.PresetInfo{Mode: p.Mode, About: p.About, Provenance: p.Provenance, Evaluation: name == set.EvaluationPreset}
	}
	if man := cat.Target; man != nil {
		out.Models = append(out.Models, wireModel("target", man, cat))
		out.Models[0].Presets = out.Presets
	}
	if man := cat.Draft; man != nil {
		out.Models = append(out.Models, wireModel("draft", man, cat))
	}
	return out
}

func wireModel(role string, man *mar.Manifest, cat Catalog) api.Model {
	m := api.Model{Role: role, Name: man.Name, Classes: man.Classes, SeqLen: man.SeqLen(), Steps: man.Diffusion.SamplingSteps,
		Image: [3]int{man.Image.Height, man.Image.Width, man.Image.Channels}, MaxImage: cat.MaxImages, Precisions: cat.PackPrecisions(man)}
	for _, s := range diffusion.Samplers {
		if s != diffusion.Distilled || man.DistilledHead != nil {
			m.Samplers = append(m.Samplers, string(s))
		}
	}
	if man.DistilledHead != nil {
		m.DistilledSteps = man.DistilledHead.Steps
	}
	if d, err := ResolvedDefaults(man); err == nil { // CheckSettings refused a pack where it is not
		m.Defaults = &d
	}
	return m
}

// ResolvedDefaults are what a request on man samples with where it and its preset set
// nothing: the pack's defaults filled in by the built-in ones.
func ResolvedDefaults(man *mar.Manifest) (api.Defaults, error) {
	var zero uint64
	opt, err := samplingOptions(Request{GenerateRequest: api.GenerateRequest{Seed: &zero}}, man)
	if err != nil {
		return api.Defaults{}, err
	}
	d := api.Defaults{NumIter: opt.NumIter, Steps: opt.Steps, Sampler: string(opt.Sampler), CFG: opt.CFG, CFGSchedule: opt.CFGSchedule,
		Temperature: opt.Temperature, Provenance: PackSettings(man).Defaults.Provenance}
	if opt.Sampler.HasEta() {
		d.Eta = ptr(opt.Eta)
	}
	return d, nil
}

// SettingsFromWire rebuilds the preset names, modes and default of a server's running pack
// from its GET /v1/models answer: enough for a client to resolve the mode a request will run
// in (ResolveMode) before sending it; the server checks the rest.
func SettingsFromWire(m *api.Models) *mar.Settings {
	set := &mar.Settings{DefaultPreset: m.DefaultPreset, Presets: map[string]Preset{}}
	for _, name := range m.Presets {
		info := m.PresetInfo[name]
		set.Presets[name] = Preset{Mode: info.Mode, About: info.About, Provenance: info.Provenance}
		if info.Evaluation {
			set.EvaluationPreset = name
		}
	}
	return set
}

// DescribeSettings writes the pack's resolved defaults and its presets with their provenance,
// a line each (marspec models): what a request on it runs.
func DescribeSettings(w io.Writer, m *mar.Manifest) {
	set := PackSettings(m)
	if d, err := ResolvedDefaults(m); err == nil {
		fmt.Fprintf(w, "  defaults: num_iter %d, %s in %d steps, cfg %g (%s), temperature %g [%s]\n",
			d.NumIter, d.Sampler, d.Steps, d.CFG, d.CFGSchedule, d.Temperature, d.Provenance)
	}
	if set.Derived {
		fmt.Fprintln(w, "  settings: none in the manifest; derived from the embedded pack's, AR steps scaled to this pack's tokens (not measured here)")
	}
	for _, name := range set.PresetNames() {
		tags := ""
		if name == set.DefaultPreset {
			tags += " (default)"
		}
		if name == set.EvaluationPreset {
			tags += " (evaluation)"
		}
		fmt.Fprintf(w, "  preset %s%s: %s\n", name, tags, PresetAbout(set.Presets[name]))
	}
}
