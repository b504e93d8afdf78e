package generation

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"marspec/api"
	"marspec/mar"
	"marspec/progress"
)

// Costs are what one transformer pass and one diffusion-head call of an open model take on
// this machine, each over one image's rows (its tokens; one token), timed at open. They make
// an estimate of what a setting costs here, not a measurement of it: a run batches rows, the
// head may run as a fused loop or a distilled head, and a server remembers first AR steps.
type Costs struct {
	Pass, Head time.Duration
	Guided     bool   // timed over the two rows of a guided image (class and "no class"), else one
	Precision  string // of the graphs timed (mar.FP32, mar.Int8)
	// Full and Lazy are a full and a lazy AR step with the cache across AR steps, timed for a
	// run with the cache on (MeasureCacheCosts; zero otherwise); the lazy step over LazySize
	// tokens.
	Full, Lazy time.Duration
	LazySize   int
}

// costRuns is how often each part is timed while its calls stay short: the first call of a
// graph allocates, so the fastest of a few is the steady cost. A long pass is timed once.
const costRuns = 3

// MeasureCosts times one transformer pass over an image that knows one token (one knowing
// none is the opening memo's, which a second call would not compute) and one head call over
// one token, of m opened at precision, guided (two rows each, as sampling runs them) or not.
func MeasureCosts(m *mar.Model, precision string, guided bool) (Costs, error) {
	man := m.Manifest
	L, D, W := man.SeqLen(), man.TokenDim, man.Width
	rows := 1
	if guided {
		rows = 2
	}
	ctx := mar.NewContextBatch(1, L, D)
	ctx.Set(0, 0, make([]float64, D))
	z, zu := make([]float32, L*W), []float32(nil)
	if guided {
		zu = make([]float32, L*W)
	}
	pass, err := fastest(func() error { return ctx.Condition(m.Transformer, z, zu) })
	if err != nil {
		return Costs{}, fmt.Errorf("timing a transformer pass: %w", err)
	}
	xt, out, t := make([]float32, rows*D), make([]float32, rows*2*D), make([]float32, rows)
	for i := range t {
		t[i] = float32(man.Diffusion.TrainingSteps / 2)
	}
	head, err := fastest(func() error { return m.Head.Predict(xt, t, z[:rows*W], rows, out) })
	if err != nil {
		return Costs{}, fmt.Errorf("timing a head call: %w", err)
	}
	return Costs{Pass: pass, Head: head, Guided: guided, Precision: pick(precision, "", mar.FP32)}, nil
}

// fastest is the shortest of up to costRuns timed calls of f, stopping after a call over a
// second.
func fastest(f func() error) (time.Duration, error) {
	best := time.Duration(-1)
	for range costRuns {
		start := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		d := time.Since(start)
		if best < 0 || d < best {
			best = d
		}
		if d > time.Second {
			break
		}
	}
	return best, nil
}

// Image estimates one image at batch 1 under opt (validated): a pass per AR step (with the
// cache, when timed, each step's kind's cost) plus a head call per token and diffusion
// step of its AR step. Timed guided and run unguided (or the other way), the cost is halved
// (doubled): a CPU's cost grows with the rows.
func (c Costs) Image(opt mar.Options, seqLen int) time.Duration {
	var total time.Duration
	for _, d := range c.Steps(opt, seqLen) {
		total += d
	}
	return total
}

// Steps are Image's estimate step by step: what each AR step of an image costs, its pass and
// its head calls (AR steps reveal unequal numbers of tokens under MAR's schedule).
func (c Costs) Steps(opt mar.Options, seqLen int) []time.Duration {
	sizes := mar.StepSizes(seqLen, opt.NumIter)
	out := make([]time.Duration, len(sizes))
	for k, size := range sizes {
		d := c.pass(opt, k, len(sizes)) + time.Duration(size*mar.StepsAt(opt, k, len(sizes)))*c.Head
		switch guided := opt.CFG != 1; {
		case guided && !c.Guided:
			d *= 2
		case !guided && c.Guided:
			d /= 2
		}
		out[k] = d
	}
	return out
}

// About says how the estimate was made, for the line that gives it.
func (c Costs) About(threads int) string {
	th := "ONNX Runtime's default threads"
	if threads > 0 {
		th = fmt.Sprintf("%d thread", threads)
		if threads > 1 {
			th += "s"
		}
	}
	rows := "unguided"
	if c.Guided {
		rows = "guided"
	}
	cache := ""
	if c.Lazy > 0 {
		tokens := "tokens"
		if c.LazySize == 1 {
			tokens = "token"
		}
		cache = fmt.Sprintf(", a full cached step (%s) and a lazy one over %d %s (%s)", progress.Span(c.Full), c.LazySize, tokens, progress.Span(c.Lazy))
	}
	return fmt.Sprintf("an estimate from one %s transformer pass (%s)%s and head call (%s) timed at open, %s, %s",
		rows, progress.Span(c.Pass), cache, progress.Span(c.Head), c.Precision, th)
}

// SettingCost is the estimated cost of one image under a preset.
type SettingCost struct {
	Preset     string
	Fallback   string // the preset that runs instead here, when the named one does not fit
	Image      time.Duration
	Precision  string // the preset runs at (its costs are the timed graphs')
	About      string // the preset's own line (its settings)
	Provenance string // where the preset's settings come from
}

// PresetCosts estimates an image under each of the pack's presets that run it alone
// (speculative presets need a draft and are left out), cheapest first. cat's target is the
// pack.
func PresetCosts(c Costs, cat Catalog) []SettingCost {
	set, _ := cat.Settings()
	var out []SettingCost
	for _, name := range set.PresetNames() {
		p, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Seed: new(uint64), Preset: name}, cat)
		if err != nil || p.Spec != nil {
			continue
		}
		sc := SettingCost{Preset: name, Image: c.Image(p.Options, p.SeqLen), Precision: p.Precision, About: set.Presets[name].About, Provenance: set.Presets[name].Provenance}
		if p.Preset != name {
			sc.Fallback = p.Preset
		}
		out = append(out, sc)
	}
	slices.SortStableFunc(out, func(a, b SettingCost) int { return int(a.Image - b.Image) })
	return out
}

// defaultPlan is what a request naming nothing runs on cat's target (one image).
func defaultPlan(cat Catalog) (*Plan, error) {
	p, err := Validate(api.GenerateRequest{Class: api.Classes{"0"}, Seed: new(uint64)}, cat)
	return &p, err
}

// DescribeCosts writes what an image of plan costs here (nil plan: the pack's default
// request) and names the presets estimated faster, with their provenance: the first lines of
// a run, and marspec models. cat's target is the pack; indent starts each line.
func DescribeCosts(w io.Writer, indent string, c Costs, cat Catalog, plan *Plan, threads int) error {
	what := "this run"
	if plan == nil {
		p, err := defaultPlan(cat)
		if err != nil {
			return err
		}
		plan, what = p, "the default request"
		if p.Preset != "" {
			what = "the default, preset " + p.Preset
		}
	}
	if plan.Spec != nil {
		fmt.Fprintf(w, "%scost here: not estimated for %s (speculative)\n", indent, what)
		return nil
	}
	if plan.Precision != c.Precision {
		what += " (runs " + plan.Precision + "; estimated from the " + c.Precision + " timings)"
	}
	image := c.Image(plan.Options, plan.SeqLen)
	fmt.Fprintf(w, "%scost here: about %s per image for %s: %s\n", indent, progress.Span(image), what, c.About(threads))
	for _, p := range PresetCosts(c, cat) {
		// a preset that runs another here (its fallback) is named as that one
		if p.Fallback != "" || p.Preset == plan.Preset || p.Image >= image {
			continue
		}
		runs := ""
		if p.Precision != c.Precision {
			runs = " (runs " + p.Precision + "; estimated from the " + c.Precision + " timings)"
		}
		fmt.Fprintf(w, "%s  faster: --preset %s%s, about %s per image: %s [%s]\n", indent, p.Preset, runs, progress.Span(p.Image),
			cutAt(p.About, 0, " (", "; ", ": "), cutAt(p.Provenance, strings.Index(p.Provenance, ":")+1, " (", ", ", "; ", ": "))
	}
	return nil
}

// TellCosts times the parts of m, open at precision (MeasureCosts, guided as plan is), and
// describes what plan costs here (nil: the pack's default request) with DescribeCosts; the
// costs are returned for the run's progress (NewRunProgress).
func TellCosts(w io.Writer, indent string, m *mar.Model, precision string, cat Catalog, plan *Plan, threads int) (Costs, error) {
	ref := plan
	if ref == nil {
		var err error
		if ref, err = defaultPlan(cat); err != nil {
			return Costs{}, err
		}
	}
	c, err := MeasureCosts(m, precision, ref.Options.CFG != 1)
	if err != nil {
		return Costs{}, err
	}
	if cache := ref.Options.Cache; cache.On {
		if err := MeasureCacheCosts(m, &c, cache, ref.SeqLen, ref.Options.NumIter); err != nil {
			return Costs{}, err
		}
	}
	return c, DescribeCosts(w, indent, c, cat, plan, threads)
}

// cutAt is s up to the first of seps found from index from on: a preset's about or
// provenance line up to its first aside, for a line that only names it ("published: MAR
// official README" of "published: MAR official README, num_iter 64 ..."; a provenance is cut
// after its kind). marspec models prints them whole.
func cutAt(s string, from int, seps ...string) string {
	cut := len(s)
	for _, sep := range seps {
		if i := strings.Index(s[from:], sep); i >= 0 && from+i < cut {
			cut = from + i
		}
	}
	return s[:cut]
}
