package generation

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"marspec/align"
	"marspec/api"
	"marspec/arsampler"
	"marspec/diffusion"
	"marspec/mar"
	"marspec/onnxrt"
)

// Modes.
const (
	ModeTarget = "target"
	ModeDraft  = "draft"
	ModeSpec   = "spec"
)

// MaxSeed keeps seeds exact in JSON numbers read by browsers (float64 mantissa).
const MaxSeed = 1<<53 - 1

// Catalog is what validation checks a request against: the packs the caller runs and limits.
type Catalog struct {
	TargetPack, DraftPack string // names used to open them (Models.Model)
	Target, Draft         *mar.Manifest
	MaxImages             int    // per request; 0 = 10000
	Provider              string // cpu or cuda: resolves schedule "auto"
	// Precision is what the packs' transformer and head graphs are opened at for requests that
	// name none (mar.FP32 or "" for the default, mar.Int8, mar.FP16 on CUDA): --precision.
	Precision string
	// Precisions are those a request may name (a server's --precisions); nil = every one the
	// pack has graphs for.
	Precisions []string
}

// Plan is a validated request with every default filled in: what a runner needs, nothing more.
type Plan struct {
	Mode, Preset string
	Pack         string // the pack that samples (target/draft modes) or the target (spec)
	DraftPack    string // spec mode
	Classes      []int  // one per image; image i has index i
	ClassNames   []string
	Options      mar.Options       // seed, cfg, temperature, num_iter, steps, final-step noise
	Spec         *arsampler.Config // spec mode
	GammaText    string            // "8" or "auto", as given
	Precision    string            // of the transformer and head graphs: mar.FP32, mar.Int8 or mar.FP16
	SeqLen       int
	GridH, GridW int
	ImageHWC     [3]int
}

// Images is the number of images the plan makes.
func (p Plan) Images() int { return len(p.Classes) }

// Request is what a caller asks for: the wire request, plus the settings only the CLI and
// offline runs offer (self-drafting and the lossy knobs), which the service does
// not expose. Nil pointers and empty strings mean "the default".
type Request struct {
	api.GenerateRequest
	SelfDraft bool // spec: the target drafts from its own previous pass (no draft pack)
	// EarlyExit (spec): the target's own first blocks plus the pack's trained exit draft (no
	// draft pack; the target pack needs early_exit graphs). Not together with SelfDraft.
	EarlyExit bool
	// ExitMaxError (spec, with EarlyExit): drafting stops at the first position whose predicted
	// RMS error of the exit exceeds it; 0 = no bound.
	ExitMaxError *float64
	Rejection    string   // spec: what replaces a rejected draft: residual (default) or target
	Tolerance    *float64 // spec: acceptance tolerance in nats; 0 = off
	// NGiven says N was given explicitly (a command-line flag): 0 is then refused instead of
	// meaning the default of one image per class.
	NGiven bool
}

// Validate checks a wire request (see ValidateRequest).
func Validate(req api.GenerateRequest, cat Catalog) (Plan, error) {
	return ValidateRequest(Request{GenerateRequest: req}, cat)
}

// ResolveMode returns the mode and preset req runs with, resolved against set, the settings of
// the pack it runs on (PackSettings): its preset's mode, its own mode, or, when it names
// neither, the pack's default preset's (spec when it names speculative settings but the
// default preset runs another mode). pack names the pack in errors.
func ResolveMode(req Request, set *mar.Settings, pack string) (mode, preset string, pre Preset, err error) {
	mode, preset = req.Mode, req.Preset
	if preset == "" && mode == "" && set.DefaultPreset != "" {
		if d, ok := set.Presets[set.DefaultPreset]; ok && (d.Mode == ModeSpec || specField(req) == "") {
			preset = set.DefaultPreset
		}
	}
	if preset != "" {
		if pre, err = lookupPreset(set, preset, pack); err != nil {
			return "", "", pre, err
		}
		if mode != "" && mode != pre.Mode {
			return "", "", pre, fieldErr("mode", mode, "omit it (preset "+preset+" runs mode "+pre.Mode+"), or omit the preset to choose the mode",
				"conflicts with preset "+preset+": a preset's settings give way to explicit ones, its mode does not")
		}
		mode = pre.Mode
	}
	if mode == "" {
		mode = ModeSpec
	}
	switch mode {
	case ModeTarget, ModeDraft, ModeSpec:
	default:
		return "", "", pre, fieldErr("mode", strconv.Quote(mode), "target, draft, spec", "unknown")
	}
	return mode, preset, pre, nil
}

// Settings returns the settings requests in this catalog resolve their presets against: the
// target pack's (the draft's when only a draft is loaded).
func (c Catalog) Settings() (*mar.Settings, string) {
	if c.Target == nil && c.Draft != nil {
		return PackSettings(c.Draft), c.DraftPack
	}
	return PackSettings(c.Target), c.TargetPack
}

// ValidateRequest checks every value of req against cat and returns the plan. Each defect is
// a *FieldError wrapping ErrInvalid and naming the field; the first one found is returned.
func ValidateRequest(req Request, cat Catalog) (Plan, error) {
	var p Plan
	set, setPack := cat.Settings()
	mode, preset, pre, err := ResolveMode(req, set, setPack)
	if err != nil {
		return p, err
	}
	man := cat.Target
	p.Pack = cat.TargetPack
	switch mode {
	case ModeTarget, ModeSpec:
	case ModeDraft:
		man, p.Pack = cat.Draft, cat.DraftPack
	}
	if man == nil {
		return p, fieldErr("mode", mode, "", "no "+mode+" model is loaded")
	}
	p.Mode, p.Preset = mode, preset
	if p.Precision, err = resolvePrecision(pick(req.Precision, presetPrecision(pre, cat, man), ""), cat, p.Pack, man); err != nil {
		return p, err
	}
	L := man.SeqLen()
	p.SeqLen, p.GridH, p.GridW = L, man.Grid.Height, man.Grid.Width
	p.ImageHWC = [3]int{man.Image.Height, man.Image.Width, man.Image.Channels}

	n := req.N
	if n == 0 && !req.NGiven {
		n = 1
	}
	if p.Classes, err = resolveClasses(man, req.Class, n, cat.MaxImages); err != nil {
		return p, err
	}
	for _, c := range p.Classes {
		p.ClassNames = append(p.ClassNames, man.Classes[c])
	}
	given := req
	req = withPreset(req, pre)
	if mode == ModeSpec && req.NumIter == nil { // the pack's default num_iter is for the modes that take it
		req.NumIter = ptr(0)
	}
	if p.Options, err = samplingOptions(req, man); err != nil {
		if pre.Fallback != "" { // e.g. a pack without the preset's distilled head
			fallback := given
			fallback.Preset, fallback.Mode = pre.Fallback, ""
			if fp, ferr := ValidateRequest(fallback, cat); ferr == nil {
				return fp, nil
			}
		}
		var fe *FieldError
		if preset != "" && errors.As(err, &fe) && samplingFieldUnset(given, fe.Field) {
			return p, fieldErr("preset", preset, "another preset, or set "+fe.Field+" explicitly",
				fmt.Sprintf("its %s %s does not fit (%s)", fe.Field, fe.Value, fe.Allowed))
		}
		return p, err
	}
	if p.Options.Cache, err = cacheSettings(req.Cache, mode, p.Pack, p.Precision, man); err != nil {
		return p, err
	}
	if mode != ModeSpec {
		if f := specField(req); f != "" {
			return p, fieldErr(f, "", "omit it, or use mode spec", "applies to mode spec only")
		}
		return p, nil
	}
	if cat.Draft == nil && !req.SelfDraft && !req.EarlyExit {
		return p, fieldErr("mode", mode, "target", "no draft model is loaded")
	}
	if p.Options.NumIter != L {
		return p, fieldErr("num_iter", p.Options.NumIter, fmt.Sprintf("omit it, or %d", L), "spec mode decodes one token per AR step")
	}
	if err := specSampler(p.Options); err != nil {
		return p, err
	}
	if p.Options.StepsLate != 0 { // the draft/target densities assume one step count for all tokens
		return p, fieldErr("steps_late", p.Options.StepsLate, "omit it, or 0", "spec mode samples every token with the same diffusion steps")
	}
	if !req.SelfDraft && !req.EarlyExit {
		p.DraftPack = cat.DraftPack
		if err := checkPackPrecision(p.Precision, p.DraftPack, cat.Draft); err != nil {
			return p, err
		}
	}
	cfg, gamma, err := specConfig(req, pre, cat.Provider)
	if err != nil {
		return p, err
	}
	if cfg.EarlyExit && man.EarlyExit == nil {
		return p, fieldErr("draft", "exit", "a draft pack, or self; scripts/train/early_exit.py adds the exit graphs to a target pack",
			"target pack "+p.Pack+" has no early_exit entry")
	}
	if cfg.EarlyExit && p.Precision != mar.FP32 { // its verification would mix fp32 blocks into an int8 target
		return p, fieldErr("draft", "exit", "a draft pack, or self; or precision "+mar.FP32,
			"the early-exit graphs have no "+p.Precision+" variant")
	}
	cfg.Sampling = p.Options
	p.Spec, p.GammaText = &cfg, gamma
	return p, nil
}

// withPreset fills the settings req leaves unset from the preset (explicit settings win), so
// a preset's values pass the same checks as a request's.
func withPreset(req Request, pre Preset) Request {
	if req.NumIter == nil && pre.NumIter > 0 {
		v := pre.NumIter
		req.NumIter = &v
	}
	// a preset's step count belongs to its sampler: another sampler asked for gets the pack's
	ownSampler := req.Sampler == "" || req.Sampler == pre.Sampler || (pre.Sampler == "" && req.Sampler == string(diffusion.DDPM))
	if req.Sampler == "" && pre.Sampler != "" {
		req.Sampler = pre.Sampler
		if req.Eta == nil && pre.Eta != nil {
			v := *pre.Eta
			req.Eta = &v
		}
	}
	if req.Steps == nil && pre.Steps > 0 && ownSampler {
		v := pre.Steps
		req.Steps = &v
	}
	if req.StepsLate == nil && pre.StepsLate > 0 {
		v := pre.StepsLate
		req.StepsLate = &v
	}
	if req.FinalStepNoise == nil && pre.FinalStepNoise {
		v := true
		req.FinalStepNoise = &v
	}
	if req.CFG == nil && pre.CFG != nil {
		v := *pre.CFG
		req.CFG = &v
	}
	if req.CFGSchedule == "" {
		req.CFGSchedule = pre.CFGSchedule
	}
	if req.Temperature == nil && pre.Temperature != nil {
		v := *pre.Temperature
		req.Temperature = &v
	}
	return req
}

// defaultsPreset is a pack's defaults as a preset, so they fill a request as a preset does
// (after the request's preset: explicit settings first, then the preset's, then these).
func defaultsPreset(d mar.Defaults) Preset {
	p := Preset{NumIter: d.NumIter, Steps: d.Steps, Sampler: d.Sampler, Eta: d.Eta, CFGSchedule: d.CFGSchedule}
	if d.CFG != 0 {
		p.CFG = &d.CFG
	}
	if d.Temperature != 0 {
		p.Temperature = &d.Temperature
	}
	return p
}

// samplingFieldUnset reports whether the sampling setting named field was left unset in req
// (so a value for it came from the preset).
func samplingFieldUnset(req Request, field string) bool {
	switch field {
	case "num_iter":
		return req.NumIter == nil
	case "steps":
		return req.Steps == nil
	case "steps_late":
		return req.StepsLate == nil
	case "sampler":
		return req.Sampler == ""
	case "eta":
		return req.Eta == nil
	case "cfg":
		return req.CFG == nil
	case "cfg_schedule":
		return req.CFGSchedule == ""
	case "temperature":
		return req.Temperature == nil
	}
	return false
}

// resolveClasses turns ids, names, file-name slugs and "all" into one class per image.
func resolveClasses(man *mar.Manifest, given api.Classes, n, maxImages int) ([]int, error) {
	if maxImages <= 0 {
		maxImages = 10000
	}
	if n < 1 || n > maxImages {
		return nil, fieldErr("n", n, fmt.Sprintf("1 to %d images per class", maxImages), "")
	}
	if len(given) == 0 {
		return nil, fieldErr("class", "", "a class id, name, 'all', or a list", "missing")
	}
	var ids []int
	for _, s := range given {
		got, err := ParseClass(man, s)
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	if len(ids)*n > maxImages {
		return nil, fieldErr("n", n, fmt.Sprintf("at most %d images per request; %d classes x n = %d", maxImages, len(ids), len(ids)*n), "too many images")
	}
	classes := make([]int, 0, len(ids)*n)
	for _, c := range ids {
		for i := 0; i < n; i++ {
			classes = append(classes, c)
		}
	}
	return classes, nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkNumbers checks the real-valued settings, whose ranges do not depend on a pack. JSON
// cannot carry NaN, so a client checks these before sending (CheckNumbers).
func checkNumbers(req api.GenerateRequest) error {
	if v := req.CFG; v != nil && (!finite(*v) || *v < 1 || *v > 50) {
		return fieldErr("cfg", *v, "1 to 50; 1 = no guidance", "")
	}
	if v := req.Temperature; v != nil && (!finite(*v) || *v < 0.05 || *v > 5) {
		return fieldErr("temperature", *v, "0.05 to 5", "")
	}
	if v := req.Prefill; v != nil && (!finite(*v) || *v < 0 || *v > 1) {
		return fieldErr("prefill", *v, "0 to 1, a fraction of the tokens", "")
	}
	return nil
}

// CheckNumbers is what a client of the service checks before sending req: the settings whose
// ranges need no pack (NaN and infinities cannot even be sent as JSON).
func CheckNumbers(req api.GenerateRequest) error { return checkNumbers(req) }

// samplingOptions fills and checks what every mode shares: the request's settings, then the
// pack's defaults (PackSettings), then the built-in ones (no guidance, linear schedule,
// temperature 1, one token per step, the pack's diffusion steps, ddpm).
func samplingOptions(req Request, man *mar.Manifest) (mar.Options, error) {
	L := man.SeqLen()
	req = withPreset(req, defaultsPreset(PackSettings(man).Defaults))
	opt := mar.Options{CFG: 1, CFGSchedule: "linear", Temperature: 1, NumIter: L, Steps: man.Diffusion.SamplingSteps}
	if req.Seed != nil {
		if *req.Seed > MaxSeed {
			return opt, fieldErr("seed", *req.Seed, fmt.Sprintf("0 to %d, or omit it for a random one", uint64(MaxSeed)), "")
		}
		opt.Seed = *req.Seed
	} else {
		opt.Seed = NewSeed()
	}
	if err := checkNumbers(req.GenerateRequest); err != nil {
		return opt, err
	}
	if req.CFG != nil {
		opt.CFG = *req.CFG
	}
	switch req.CFGSchedule {
	case "":
	case "linear", "constant":
		opt.CFGSchedule = req.CFGSchedule
	default:
		return opt, fieldErr("cfg_schedule", strconv.Quote(req.CFGSchedule), "linear, constant", "unknown")
	}
	if req.Temperature != nil {
		opt.Temperature = *req.Temperature
	}
	if req.NumIter != nil {
		v := *req.NumIter
		if v < 0 || v > L {
			return opt, fieldErr("num_iter", v, fmt.Sprintf("1 to %d AR steps, or 0 = one token per step", L), "")
		}
		opt.NumIter = v
		if v == 0 {
			opt.NumIter = L
		}
	}
	if req.Steps != nil {
		v := *req.Steps
		if v < 0 || v > man.Diffusion.TrainingSteps {
			return opt, fieldErr("steps", v, fmt.Sprintf("1 to %d diffusion steps, or 0 = the pack's %d", man.Diffusion.TrainingSteps, man.Diffusion.SamplingSteps), "")
		}
		if v > 0 {
			opt.Steps = v
		}
	}
	if req.StepsLate != nil {
		if v := *req.StepsLate; v < 0 || v > opt.Steps {
			return opt, fieldErr("steps_late", v, fmt.Sprintf("0 = no annealing, or 1 to steps = %d", opt.Steps), "")
		}
		opt.StepsLate = *req.StepsLate
	}
	if req.FinalStepNoise != nil {
		opt.FinalStepNoise = *req.FinalStepNoise
	}
	sampler, err := diffusion.ParseSampler(req.Sampler)
	if err != nil {
		return opt, fieldErr("sampler", strconv.Quote(req.Sampler), diffusion.SamplerNames(), "unknown")
	}
	opt.Sampler = sampler
	if req.Eta != nil {
		if !sampler.HasEta() {
			return opt, fieldErr("eta", *req.Eta, "omit it, or use sampler ddim", "sampler "+string(sampler)+" has no eta")
		}
		if v := *req.Eta; !finite(v) || v < 0 || v > 1 {
			return opt, fieldErr("eta", v, "0 to 1; 0 = deterministic, 1 = ddpm's law", "")
		}
		opt.Eta = *req.Eta
	}
	if e := mar.CheckDistilled(man, opt); e != nil {
		return opt, fieldErr(e.Field, e.Value, e.Allowed, e.Reason)
	}
	return opt, nil
}

// specField names the first speculative setting present in req, or "".
func specField(req Request) string {
	switch {
	case req.SelfDraft, req.EarlyExit:
		return "draft"
	case req.ExitMaxError != nil && *req.ExitMaxError != 0:
		return "exit_max_error"
	case req.Rejection != "":
		return "rejection"
	case req.Tolerance != nil:
		return "tolerance"
	case req.Gamma != "":
		return "gamma"
	case req.Prefill != nil:
		return "prefill"
	case req.Verify != "":
		return "verify"
	case req.Acceptance != "":
		return "acceptance"
	case req.Align != nil:
		return "align"
	case req.Schedule != "":
		return "schedule"
	case req.MaxResampleTries != nil:
		return "max_resample_tries"
	}
	return ""
}

func pick(given, preset, def string) string {
	if given != "" {
		return given
	}
	if preset != "" {
		return preset
	}
	return def
}

// specConfig fills and checks the speculative settings.
func specConfig(req Request, pre Preset, provider string) (arsampler.Config, string, error) {
	cfg := arsampler.DefaultConfig()
	gamma := pick(string(req.Gamma), pre.Gamma, "8")
	if gamma == "auto" {
		cfg.AutoGamma = true
	} else {
		g, err := strconv.Atoi(gamma)
		if err != nil {
			return cfg, "", fieldErr("gamma", strconv.Quote(gamma), "1 to 256, or auto", "not a whole number")
		}
		if g < 1 || g > 256 {
			return cfg, "", fieldErr("gamma", g, "1 to 256, or auto", "")
		}
		cfg.Gamma = g
	}
	if err := checkNumbers(req.GenerateRequest); err != nil {
		return cfg, "", err
	}
	if req.Prefill != nil {
		cfg.Prefill = *req.Prefill
	}
	var err error
	if cfg.Verify, err = arsampler.ParseVerify(pick(req.Verify, pre.Verify, "prefix")); err != nil {
		return cfg, "", fieldErr("verify", strconv.Quote(req.Verify), "prefix, group", "unknown")
	}
	if cfg.Acceptance, err = align.ParseCriterion(pick(req.Acceptance, pre.Acceptance, "paper")); err != nil {
		return cfg, "", fieldErr("acceptance", strconv.Quote(req.Acceptance), "paper, exact", "unknown")
	}
	if req.Align != nil {
		cfg.Align = *req.Align
	}
	if err := exitSettings(req, &cfg); err != nil {
		return cfg, "", err
	}
	switch s := pick(req.Schedule, "", "auto"); s {
	case "auto":
		// a CPU pays for every context row, a GPU for every call; self-drafting's one gain is
		// that a round's contexts share one pass, so it stays batched; early-exit rounds run
		// batched only (a lazy one would cost more than the target alone)
		cfg.Schedule = arsampler.Lazy
		if strings.HasPrefix(provider, "cuda") || cfg.SelfDraft || cfg.EarlyExit {
			cfg.Schedule = arsampler.Batched
		}
	case "batched", "lazy":
		cfg.Schedule, _ = arsampler.ParseSchedule(s)
		if cfg.EarlyExit && cfg.Schedule == arsampler.Lazy {
			return cfg, "", fieldErr("schedule", strconv.Quote(s), "auto, batched", "draft exit runs batched rounds only (a lazy round costs more than the target alone)")
		}
	default:
		return cfg, "", fieldErr("schedule", strconv.Quote(s), "auto, batched, lazy", "unknown")
	}
	if req.MaxResampleTries != nil {
		if v := *req.MaxResampleTries; v < 1 || v > 1_000_000 {
			return cfg, "", fieldErr("max_resample_tries", v, "1 to 1000000", "")
		}
		cfg.MaxResampleTries = *req.MaxResampleTries
	}
	if cfg.Rejection, err = arsampler.ParseRejection(pick(req.Rejection, "", "residual")); err != nil {
		return cfg, "", fieldErr("rejection", strconv.Quote(req.Rejection), "residual, target", "unknown")
	}
	if req.Tolerance != nil {
		// e^10 ~ 22000: beyond that every draft is accepted anyway
		if v := *req.Tolerance; !finite(v) || v < 0 || v > 10 {
			return cfg, "", fieldErr("tolerance", v, "0 = off, up to 10 nats", "")
		}
		cfg.Tolerance = *req.Tolerance
	}
	return cfg, gamma, nil
}

// exitSettings fills the draft source (self, exit) and the exit's confidence bound into cfg,
// whose verification is already set.
func exitSettings(req Request, cfg *arsampler.Config) error {
	if req.SelfDraft && req.EarlyExit {
		return fieldErr("draft", "self and exit", "one of: a draft pack, self, exit", "two draft sources")
	}
	cfg.SelfDraft, cfg.EarlyExit = req.SelfDraft, req.EarlyExit
	if req.ExitMaxError != nil {
		v := *req.ExitMaxError
		if !finite(v) || v < 0 {
			return fieldErr("exit_max_error", v, "0 = no bound, or a positive RMS error", "")
		}
		if v != 0 && !req.EarlyExit {
			return fieldErr("exit_max_error", v, "omit it, or use draft exit", "bounds the early exit's drafting only")
		}
		cfg.ExitMaxError = v
	}
	if cfg.EarlyExit && cfg.Verify != arsampler.Prefix {
		return fieldErr("verify", strconv.Quote(cfg.Verify.String()), "prefix", "draft exit verifies with prefix only (group has no drafted contexts to continue)")
	}
	return nil
}

// SamplingOptions checks the sampling settings of req alone against a pack's manifest (the
// speculative ones are ignored): for runs that choose their own classes and images, such as
// scoring runs, so their cfg, temperature and steps are checked here like a request's.
func SamplingOptions(req Request, man *mar.Manifest) (mar.Options, error) {
	return samplingOptions(req, man)
}

// SpecConfig checks the speculative settings of req alone and returns them with sampling as
// the target's options: for runs that build their own images (bench, scoring runs) but check
// their settings here, like a request.
func SpecConfig(req Request, provider string, sampling mar.Options) (arsampler.Config, error) {
	cfg, _, err := specConfig(req, Preset{}, provider)
	cfg.Sampling = sampling
	return cfg, err
}

// ParseSwitch reads an on/off setting such as align.
func ParseSwitch(field, v string) (bool, error) {
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fieldErr(field, strconv.Quote(v), "on, off", "unknown")
}

// ValidateBatch checks how many images a direct run keeps in flight (0 = all of them).
func ValidateBatch(n int) error {
	if n < 0 || n > 4096 {
		return fieldErr("batch", n, "0 = all images, or 1 to 4096", "")
	}
	return nil
}

// NewSeed draws a seed for a request that gave none (it is reported back, so the images can
// be made again).
func NewSeed() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) & MaxSeed
}

// ValidateRuntime checks the settings of the model runtime (not part of a request).
func ValidateRuntime(provider string, threads int) error {
	if _, err := onnxrt.ParseDevice(provider); err != nil {
		return fieldErr("provider", strconv.Quote(provider), "cpu, cuda, cuda:N", "unknown")
	}
	if threads < 0 || threads > 1024 {
		return fieldErr("threads", threads, "0 = ONNX Runtime's default, or 1 to 1024", "")
	}
	return nil
}
