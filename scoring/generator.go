package scoring

import (
	"context"
	"fmt"
	"image"
	"path/filepath"
	"time"

	"marspec/api"
	"marspec/arsampler"
	"marspec/fid"
	"marspec/generation"
	"marspec/mar"
	"marspec/render"
)

// chunkGenerator generates the images of one configuration, a chunk at a time.
type chunkGenerator struct {
	name, desc string
	gamma      string // spec: the gamma setting; group: verify/acceptance/align, for plots
	group      string
	dir        string     // the run folder
	model      *mar.Model // target-only or draft-only
	target     *mar.Model
	draft      *mar.Model
	precision  string // the configuration's: the models above are opened at it
	spec       *arsampler.Config
	opt        mar.Options
	settings   Settings
}

// newChunkGenerator reads one configuration over the run's shared settings, checked as a
// request is (generation.ParseRunConfig) against the packs opened at the run's precision;
// packsAt gives them at the configuration's own (precision=); schedule and provider come from
// the command.
func newChunkGenerator(text string, s Settings, target, draft *mar.Model, packsAt func(precision string) (*mar.Model, *mar.Model, error),
	schedule, provider string) (chunkGenerator, error) {
	base := generation.Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"},
		Seed: &s.Seed, CFG: &s.CFG, CFGSchedule: s.CFGSchedule, Temperature: &s.Temperature, Steps: &s.Steps, Schedule: schedule}}
	cat := generation.Catalog{TargetPack: "target", DraftPack: "draft", Target: target.Manifest, Draft: draft.Manifest, Provider: provider,
		Precision: s.Precision}
	rc, err := generation.ParseRunConfig(text, base, cat)
	if err != nil {
		return chunkGenerator{}, err
	}
	plan := rc.Plan
	if target, draft, err = packsAt(plan.Precision); err != nil {
		return chunkGenerator{}, fmt.Errorf("configuration %q: %w", text, err)
	}
	g := chunkGenerator{name: rc.Name, desc: rc.Desc, opt: plan.Options, spec: plan.Spec, settings: s, target: target, draft: draft,
		precision: plan.Precision}
	switch rc.Kind {
	case generation.ModeTarget:
		g.model = target
		return g, nil
	case generation.ModeDraft:
		g.model = draft
		return g, nil
	}
	d := draft
	if plan.Spec.SelfDraft || plan.Spec.EarlyExit {
		d = nil
	}
	if _, err := arsampler.NewEngine(target, d, *plan.Spec); err != nil { // packs that do not match, a prefill of no token
		return g, fmt.Errorf("configuration %q: %v", text, err)
	}
	g.gamma = rc.Gamma
	g.group = fmt.Sprintf("%s/%s/align %s/prefill %g", rc.Verify, rc.Acceptance, rc.Align, rc.Prefill)
	return g, nil
}

// run generates and evaluates chunk c.
func (g chunkGenerator) run(c int, ev *fid.Evaluator) (*fid.Chunk, error) {
	first := c * g.settings.Chunk
	last := min(first+g.settings.Chunk, g.settings.N)
	ch := &fid.Chunk{Index: c}
	for i := first; i < last; i++ {
		ch.Images = append(ch.Images, i)
		ch.Classes = append(ch.Classes, i%len(g.target.Manifest.Classes))
	}
	start := time.Now()
	gen, err := generation.NewGenerator(g.plan(), generation.Fixed{generation.ModelName("target", g.precision): g.target, generation.ModelName("draft", g.precision): g.draft}, g.settings.Batch)
	if err != nil {
		return nil, err
	}
	res, err := gen.Generate(context.Background(), ch.Classes, first)
	if err != nil {
		return nil, err
	}
	pixels := make([][]uint8, len(res.Images))
	for i, im := range res.Images {
		pixels[i] = im.Pixels
	}
	if sum := res.Summary; sum != nil {
		ch.Drafted, ch.Accepted = sum.Drafted, sum.Accepted
		ch.AcceptedAtStep, ch.RejectedAtStep = sum.AcceptedAtStep, sum.RejectedAtStep
	}
	ch.Seconds = time.Since(start).Seconds()
	if ch.Features, ch.Probs, err = ev.Evaluate(pixels); err != nil {
		return nil, err
	}
	if c == 0 {
		if err := g.saveGrid(pixels); err != nil {
			return nil, err
		}
	}
	return ch, nil
}

// plan is the configuration as a generation plan over the run's two packs (named "target"
// and "draft"), so a chunk is made as `marspec generate` makes its images.
func (g chunkGenerator) plan() generation.Plan {
	p := generation.Plan{Mode: generation.ModeTarget, Pack: "target", Options: g.opt, Spec: g.spec, Precision: g.precision}
	switch {
	case g.spec != nil:
		p.Mode, p.DraftPack = generation.ModeSpec, "draft"
	case g.model == g.draft:
		p.Mode, p.Pack = generation.ModeDraft, "draft"
	}
	return p
}

// saveGrid writes the first images of a run, a row of up to five per class (images cycle
// through the classes), each row named by its class.
func (g chunkGenerator) saveGrid(pixels [][]uint8) error {
	man := g.target.Manifest
	classes := len(man.Classes)
	const perClass = 5
	var cells []image.Image // nil cells stay empty: a class with fewer images keeps its row
	var labels []string
	for c := 0; c < classes && c < len(pixels); c++ {
		labels = append(labels, fmt.Sprintf("%d %s", c, man.Classes[c]))
		for k := range perClass {
			var cell image.Image
			if i := c + k*classes; i < len(pixels) {
				img, err := render.FromPixels(pixels[i], man.Image.Height, man.Image.Width, man.Image.Channels)
				if err != nil {
					return err
				}
				cell = img
			}
			cells = append(cells, cell)
		}
	}
	return render.WritePNG(filepath.Join(g.dir, g.name+"-samples.png"), render.LabelledGrid(cells, perClass, 3, labels), g.desc)
}
