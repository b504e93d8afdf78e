package generation

import "strings"

// GenerateSettings are what `marspec generate` asks for, as its flags hold them: the packs,
// classes and seed, and the sampling and speculative settings. Request maps them onto a
// Request; only the flags given on the command line (set) are copied, so a preset's values
// and the pack's defaults are not overridden by flag defaults.
type GenerateSettings struct {
	Mode, Preset         string
	Model, Target, Draft string // Model runs one pack alone; Draft may be DraftSelf or DraftExit
	Class                string // comma-separated ids, names, slugs or all
	N                    int
	Seed                 uint64
	CFG, Temperature     float64
	CFGSchedule, Sampler string
	Eta                  float64
	NumIter, Steps       int
	StepsLate            int
	FinalNoise           bool
	Cache                CacheFlags
	Spec                 SpecSettings
	// MaxImages and Provider go into the catalog (the runtime's, not the request's); Precision
	// goes into both: the request names it when the flag was given (so a server gets it too),
	// and the catalog's default is it.
	MaxImages           int
	Provider, Precision string
}

// Request turns the settings into a request and the catalog of the packs it needs, their
// manifests read when local (the target's settings resolve the preset and the default
// request; the draft's is read only for the modes that run it, so a bad --draft does not stop
// a target-only run). With local false no pack is read (a server runs its own).
func (g *GenerateSettings) Request(set map[string]bool, local bool) (Request, Catalog, error) {
	var req Request
	cat := Catalog{TargetPack: g.Target, DraftPack: g.Draft, MaxImages: g.MaxImages, Provider: g.Provider, Precision: g.Precision}
	req.Mode, req.Preset = g.Mode, g.Preset
	if g.Model != "" {
		// the draft pack alone is draft mode (stamped so); any other pack runs as the target
		mode := ModeTarget
		if g.Model == g.Draft && g.Model != DraftSelf && g.Model != DraftExit {
			mode = ModeDraft
		} else {
			cat.TargetPack = g.Model
		}
		if g.Mode != "" && g.Mode != mode {
			return req, cat, &FieldError{Field: "model", Value: g.Model, Allowed: "omit --mode, or use --target and --draft with --mode " + g.Mode,
				Reason: "runs one pack alone (mode " + mode + ")"}
		}
		req.Mode = mode
	}
	for _, c := range strings.Split(g.Class, ",") {
		req.Class = append(req.Class, strings.TrimSpace(c))
	}
	req.N, req.NGiven = g.N, true
	req.Seed = &g.Seed
	if set["cfg"] {
		req.CFG = &g.CFG
	}
	if set["cfg-schedule"] {
		req.CFGSchedule = g.CFGSchedule
	}
	if set["temperature"] {
		req.Temperature = &g.Temperature
	}
	if set["sampler"] {
		req.Sampler = g.Sampler
	}
	if set["eta"] {
		req.Eta = &g.Eta
	}
	if set["num-iter"] {
		req.NumIter = &g.NumIter
	}
	if set["steps"] {
		req.Steps = &g.Steps
	}
	if set["precision"] {
		req.Precision = g.Precision
	}
	if set["steps-late"] {
		req.StepsLate = &g.StepsLate
	}
	if set["final-step-noise"] {
		req.FinalStepNoise = &g.FinalNoise
	}
	if err := g.Cache.Request(&req, set); err != nil {
		return req, cat, err
	}
	g.Spec.SelfDraft, g.Spec.EarlyExit = g.Draft == DraftSelf, g.Draft == DraftExit
	if err := g.Spec.Request(&req, set); err != nil {
		return req, cat, err
	}
	if !local {
		return req, cat, nil
	}
	// only the manifests of the packs the mode runs are read (their graphs when they open), so
	// a bad --draft does not stop a target-only run; the target's settings resolve the preset
	// and the default request
	if req.Mode != ModeDraft {
		m, err := LoadManifest(cat.TargetPack)
		if err != nil {
			return req, cat, err
		}
		cat.Target = m
	}
	settings, pack := cat.Settings()
	mode, _, _, err := ResolveMode(req, settings, pack)
	if err != nil {
		return req, cat, err
	}
	if mode == ModeDraft || (mode == ModeSpec && !req.SelfDraft && !req.EarlyExit) {
		if g.Draft == DraftSelf || g.Draft == DraftExit {
			return req, cat, &FieldError{Field: "draft", Value: g.Draft, Allowed: "a draft pack, or mode spec",
				Reason: "drafting with the target itself has no draft-only mode"}
		}
		m, err := LoadManifest(cat.DraftPack)
		if err != nil {
			return req, cat, err
		}
		cat.Draft = m
	}
	return req, cat, nil
}
