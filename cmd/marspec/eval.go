package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"marspec/api"
	"marspec/arsampler"
	"marspec/fid"
	"marspec/generation"
	"marspec/mar"
	"marspec/models"
	"marspec/progress"
	"marspec/render"
)

// evalSettings fix a scoring run; a resumed run must use the same ones.
type evalSettings struct {
	N           int      `json:"n"`
	Seed        uint64   `json:"seed"`
	Batch       int      `json:"batch"`
	Chunk       int      `json:"chunk"`
	CFG         float64  `json:"cfg"`
	Temperature float64  `json:"temperature"`
	Steps       int      `json:"steps"`
	Target      string   `json:"target"`
	Draft       string   `json:"draft"`
	Configs     []string `json:"configs"`
}

const defaultEvalConfigs = "target,draft,spec,spec:acceptance=exact,spec:verify=group,spec:verify=group:acceptance=exact"

func runEval(args []string) error {
	if len(args) > 0 && args[0] == "merge" {
		return runEvalMerge(args[1:])
	}
	if len(args) > 0 && args[0] == "table" {
		return runEvalTable(args[1:])
	}
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	var s evalSettings
	out := fs.String("out", "", "run folder (required); an existing one is resumed")
	fs.IntVar(&s.N, "n", 2000, "images per configuration (classes cycle 0..9)")
	fs.Uint64Var(&s.Seed, "seed", 1, "seed of every configuration")
	fs.IntVar(&s.Batch, "batch", 32, "images in flight")
	fs.IntVar(&s.Chunk, "chunk", 64, "images per chunk (the unit of resuming and sharding)")
	fs.Float64Var(&s.CFG, "cfg", 1, "classifier-free guidance scale")
	fs.Float64Var(&s.Temperature, "temperature", 1, "diffusion temperature")
	fs.IntVar(&s.Steps, "steps", 0, "diffusion sampling steps (0 = the pack's)")
	fs.StringVar(&s.Target, "target", "target", "target pack")
	fs.StringVar(&s.Draft, "draft", "draft", "draft pack")
	configs := fs.String("configs", defaultEvalConfigs, "configurations, comma-separated: target[:key=value...] and draft[:...] with keys "+generation.RunConfigKeysTarget+"; spec[:...] with keys "+generation.RunConfigKeysSpec)
	shard := fs.String("shard", "0/1", "i/n: generate only chunks c with c mod n == i")
	evaluator := fs.String("evaluator", "evaluator", "evaluator (embedded or a folder)")
	schedule := fs.String("schedule", "auto", "prefix rounds: batched, lazy or auto (lazy on cpu); the images are the same, only the cost differs, so it is not part of the run's settings")
	reference := fs.String("reference", "", "reference statistics .npz (default: the embedded Fashion-MNIST test set)")
	quiet := addQuietFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := generation.ValidateRuntime(rt.provider, rt.threads); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required (the run folder)")
	}
	if s.N < 10 || s.N > 1000000 || s.Chunk < 1 || s.Batch < 1 {
		return fmt.Errorf("--n must be 10 to 1000000, --chunk and --batch positive")
	}
	s.Configs = splitList(*configs)
	shardI, shardN, err := parseShard(*shard)
	if err != nil {
		return err
	}
	gens, ev, err := openRun(rt, *out, s, *evaluator, *schedule)
	if err != nil {
		return err
	}
	chunks := (s.N + s.Chunk - 1) / s.Chunk
	bar := progress.New(os.Stderr, "eval "+*out, "chunks", missingChunks(*out, gens, chunks, shardI, shardN), progress.Options{Quiet: *quiet})
	for _, g := range gens {
		for c := shardI; c < chunks; c += shardN {
			if fid.HasChunk(*out, g.name, c) {
				continue
			}
			ch, err := g.run(c, ev)
			if err != nil {
				bar.Done()
				return fmt.Errorf("%s chunk %d: %v", g.name, c, err)
			}
			if err := fid.WriteChunk(*out, g.name, ch); err != nil {
				bar.Done()
				return err
			}
			bar.Add(1, fmt.Sprintf("%s chunk %d (%.1f s)", g.name, c, ch.Seconds))
		}
	}
	bar.Done()
	return reportRun(*out, s, gens, ev, *reference)
}

// missingChunks counts the chunks of this shard not yet on disk: the work a resumed run has left.
func missingChunks(dir string, gens []chunkGenerator, chunks, shardI, shardN int) int {
	n := 0
	for _, g := range gens {
		for c := shardI; c < chunks; c += shardN {
			if !fid.HasChunk(dir, g.name, c) {
				n++
			}
		}
	}
	return n
}

// addQuietFlag is --quiet of the long commands.
func addQuietFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("quiet", false, "no progress on stderr (a bar on a terminal, a line per chunk otherwise)")
}

// openRun pins the run's settings in its folder, opens the models and the evaluator and
// builds one generator per configuration.
func openRun(rt *runtimeFlags, dir string, s evalSettings, evaluator, schedule string) ([]chunkGenerator, *fid.Evaluator, error) {
	gens, ev, err := openGenerators(rt, s, evaluator, schedule)
	if err != nil {
		return nil, nil, err
	}
	for i := range gens {
		gens[i].dir = dir
	}
	// only now, with every configuration valid, is the run folder pinned: a typo must not leave
	// a run.json that refuses the corrected command
	if err := checkRunSettings(dir, s); err != nil {
		return nil, nil, err
	}
	return gens, ev, nil
}

// openGenerators opens the packs and the evaluator and checks every configuration.
func openGenerators(rt *runtimeFlags, s evalSettings, evaluator, schedule string) ([]chunkGenerator, *fid.Evaluator, error) {
	target, err := rt.open(s.Target)
	if err != nil {
		return nil, nil, err
	}
	// the run's shared settings are checked as a request's are (NaN, 0 and out-of-range values
	// named by field) before any configuration or chunk
	if _, err := generation.SamplingOptions(generation.Request{GenerateRequest: api.GenerateRequest{Seed: &s.Seed,
		CFG: &s.CFG, Temperature: &s.Temperature, Steps: &s.Steps}}, target.Manifest); err != nil {
		return nil, nil, err
	}
	draft, err := rt.open(s.Draft)
	if err != nil {
		return nil, nil, err
	}
	ev, err := openEvaluator(rt, evaluator)
	if err != nil {
		return nil, nil, err
	}
	gens := make([]chunkGenerator, len(s.Configs))
	for i, c := range s.Configs {
		if gens[i], err = newChunkGenerator(c, s, target, draft, schedule, rt.provider); err != nil {
			return nil, nil, err
		}
	}
	seen := map[string]string{}
	for i, g := range gens {
		if other, dup := seen[g.name]; dup {
			return nil, nil, fmt.Errorf("configurations %q and %q are the same configuration", other, s.Configs[i])
		}
		seen[g.name] = s.Configs[i]
	}
	return gens, ev, nil
}

func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("shard %q: want i/n with 0 <= i < n", s)
	}
	return i, n, nil
}

// checkRunSettings writes run.json for a new run, or refuses to resume one made otherwise.
func checkRunSettings[T any](dir string, s T) error {
	path := filepath.Join(dir, "run.json")
	data, err := os.ReadFile(path)
	if err == nil {
		var old T
		if err := json.Unmarshal(data, &old); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		if !reflect.DeepEqual(old, s) {
			return fmt.Errorf("%s holds a run made with other settings: %s; resume it with the run's settings, or use another --out", path, settingsDiff(old, s))
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, _ = json.MarshalIndent(s, "", "  ")
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// settingsDiff names each setting that differs between a run on disk and this command, as
// "--name: the run has A, this command B", in the settings' order.
func settingsDiff[T any](old, cur T) string {
	a, b := settingsFields(old), settingsFields(cur)
	var diffs []string
	for _, f := range b {
		if v, ok := findField(a, f.name); !ok || v != f.value {
			if !ok {
				v = "nothing"
			}
			diffs = append(diffs, fmt.Sprintf("--%s: the run has %s, this command %s", strings.ReplaceAll(f.name, "_", "-"), v, f.value))
		}
	}
	if len(diffs) == 0 {
		return "settings the flags do not show"
	}
	return strings.Join(diffs, "; ")
}

type settingsField struct{ name, value string }

// settingsFields lists a settings struct's JSON fields in order, each value as JSON.
func settingsFields(s any) []settingsField {
	v := reflect.ValueOf(s)
	var out []settingsField
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(v.Field(i))
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			data, _ := json.Marshal(v.Field(i).Interface())
			out = append(out, settingsField{name, string(data)})
		}
	}
	walk(v)
	return out
}

func findField(fields []settingsField, name string) (string, bool) {
	for _, f := range fields {
		if f.name == name {
			return f.value, true
		}
	}
	return "", false
}

func openEvaluator(rt *runtimeFlags, name string) (*fid.Evaluator, error) {
	opt, err := rt.sessionOptions()
	if err != nil {
		return nil, err
	}
	return generation.OpenEvaluator(name, opt)
}

// chunkGenerator generates the images of one configuration, a chunk at a time.
type chunkGenerator struct {
	name, desc string
	gamma      string // spec: the gamma setting; group: verify/acceptance/align, for plots
	group      string
	dir        string     // the run folder
	model      *mar.Model // target-only or draft-only
	target     *mar.Model
	draft      *mar.Model
	spec       *arsampler.Config
	opt        mar.Options
	settings   evalSettings
}

// newChunkGenerator reads one configuration over the run's shared settings, checked as a
// request is (generation.ParseRunConfig); schedule and provider come from the command.
func newChunkGenerator(text string, s evalSettings, target, draft *mar.Model, schedule, provider string) (chunkGenerator, error) {
	base := generation.Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"},
		Seed: &s.Seed, CFG: &s.CFG, Temperature: &s.Temperature, Steps: &s.Steps, Schedule: schedule}}
	cat := generation.Catalog{TargetPack: "target", DraftPack: "draft", Target: target.Manifest, Draft: draft.Manifest, Provider: provider}
	rc, err := generation.ParseRunConfig(text, base, cat)
	if err != nil {
		return chunkGenerator{}, err
	}
	plan := rc.Plan
	g := chunkGenerator{name: rc.Name, desc: rc.Desc, opt: plan.Options, spec: plan.Spec, settings: s, target: target, draft: draft}
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
	gen, err := generation.NewGenerator(g.plan(), generation.Fixed{"target": g.target, "draft": g.draft}, g.settings.Batch)
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
	p := generation.Plan{Mode: generation.ModeTarget, Pack: "target", Options: g.opt, Spec: g.spec}
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

// configResult is one row of the report.
type configResult struct {
	Name          string    `json:"name"`
	Description   string    `json:"description"`
	Images        int       `json:"images"`
	FID           float64   `json:"fid"`
	ISMean        float64   `json:"is_mean"`
	ISStd         float64   `json:"is_std"`
	ClassAccuracy float64   `json:"class_accuracy"`
	Alpha         *float64  `json:"alpha,omitempty"`
	SecondsImage  float64   `json:"seconds_per_image"`
	Speedup       *float64  `json:"speedup_vs_target,omitempty"`
	AlphaAtStep   []float64 `json:"alpha_at_step,omitempty"`
}

func reportRun(dir string, s evalSettings, gens []chunkGenerator, ev *fid.Evaluator, reference string) error {
	chunks := (s.N + s.Chunk - 1) / s.Chunk
	var ref *fid.Stats
	var err error
	if reference == "" {
		ref, err = embeddedReference()
	} else {
		ref, err = fid.ReadStats(reference)
	}
	if err != nil {
		return err
	}
	var rows []configResult
	for _, g := range gens {
		chs, missing, err := fid.ReadChunks(dir, g.name, chunks)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			fmt.Printf("%s: %d of %d chunks present; the report waits for the other shards (marspec eval merge)\n", g.name, chunks-len(missing), chunks)
			return nil
		}
		row, err := scoreConfig(g, chs, ev.Manifest.Features.Dim, ref)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	var targetSec float64
	for _, r := range rows {
		if r.Name == "target" {
			targetSec = r.SecondsImage
		}
	}
	for i := range rows {
		if targetSec > 0 && rows[i].Name != "target" {
			sp := targetSec / rows[i].SecondsImage
			rows[i].Speedup = &sp
		}
	}
	report := map[string]any{"settings": s, "results": rows, "evaluator": ev.Manifest.Name,
		"versions": map[string]string{"go": runtime.Version(), "target": gens[0].target.Manifest.Name, "draft": gens[0].draft.Manifest.Name}}
	data, _ := json.MarshalIndent(report, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := writePlots(dir, s, gens, rows); err != nil {
		return err
	}
	md := markdownTable(s, rows)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

func embeddedReference() (*fid.Stats, error) {
	data, err := models.FS.ReadFile("evaluator/fmnist_test_stats.npz")
	if err != nil {
		return nil, err
	}
	return fid.ReadStatsFrom(bytes.NewReader(data), int64(len(data)), "embedded/evaluator/fmnist_test_stats.npz")
}

func scoreConfig(g chunkGenerator, chs []*fid.Chunk, dim int, ref *fid.Stats) (configResult, error) {
	row := configResult{Name: g.name, Description: g.desc}
	acc, probs, err := fid.ChunkStats(chs, dim)
	if err != nil {
		return row, err
	}
	// the configuration's feature statistics, for FID against other runs (marspec fid A B)
	if err := fid.WriteStats(filepath.Join(g.dir, g.name+"-stats.npz"), acc); err != nil {
		return row, err
	}
	sigma, err := acc.Covariance()
	if err != nil {
		return row, err
	}
	if row.FID, err = fid.Frechet(acc.Mean, sigma, ref.Mu, ref.Sigma); err != nil {
		return row, err
	}
	if row.ISMean, row.ISStd, err = fid.ShuffledInceptionScore(probs, 10, 0); err != nil {
		return row, err
	}
	correct, drafted, accepted, secs := 0, 0, 0, 0.0
	L := g.target.Manifest.SeqLen()
	accAt, rejAt := make([]int, L), make([]int, L)
	for _, ch := range chs {
		for i, p := range ch.Probs {
			if argmax(p) == ch.Classes[i] {
				correct++
			}
		}
		drafted += ch.Drafted
		accepted += ch.Accepted
		secs += ch.Seconds
		for i := range ch.AcceptedAtStep {
			accAt[i] += ch.AcceptedAtStep[i]
			rejAt[i] += ch.RejectedAtStep[i]
		}
	}
	row.Images = acc.N
	row.ClassAccuracy = float64(correct) / float64(acc.N)
	row.SecondsImage = secs / float64(acc.N)
	if g.spec != nil && drafted > 0 {
		a := float64(accepted) / float64(drafted)
		row.Alpha = &a
		for i := range accAt {
			if n := accAt[i] + rejAt[i]; n > 0 {
				row.AlphaAtStep = append(row.AlphaAtStep, float64(accAt[i])/float64(n))
			} else {
				row.AlphaAtStep = append(row.AlphaAtStep, -1)
			}
		}
	}
	return row, nil
}

func argmax(p []float64) int {
	best := 0
	for i, v := range p {
		if v > p[best] {
			best = i
		}
	}
	return best
}

func markdownTable(s evalSettings, rows []configResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "N = %d images per configuration, seed %d, cfg %g, temperature %g, batch %d\n\n", s.N, s.Seed, s.CFG, s.Temperature, s.Batch)
	b.WriteString("| configuration | FID | IS | class accuracy | alpha | s/image | speedup vs target |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		alpha, sp := "–", "–"
		if r.Alpha != nil {
			alpha = fmt.Sprintf("%.3f", *r.Alpha)
		}
		if r.Speedup != nil {
			sp = fmt.Sprintf("%.2fx", *r.Speedup)
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f ± %.2f | %.3f | %s | %.4f | %s |\n", r.Description, r.FID, r.ISMean, r.ISStd, r.ClassAccuracy, alpha, r.SecondsImage, sp)
	}
	return b.String()
}

// runEvalMerge copies the chunk records of shard run folders into one run folder and reports.
func runEvalMerge(args []string) error {
	fs := flag.NewFlagSet("eval merge", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	out := fs.String("out", "", "the merged run folder")
	evaluator := fs.String("evaluator", "evaluator", "evaluator (embedded or a folder)")
	reference := fs.String("reference", "", "reference statistics .npz (default: the embedded test set)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("usage: marspec eval merge --out RUN SHARD_RUN...")
	}
	var s *evalSettings
	for _, shard := range fs.Args() {
		data, err := os.ReadFile(filepath.Join(shard, "run.json"))
		if err != nil {
			return fmt.Errorf("%s is not a run folder: %v", shard, err)
		}
		var cur evalSettings
		if err := json.Unmarshal(data, &cur); err != nil {
			return err
		}
		if s != nil && !reflect.DeepEqual(*s, cur) {
			return fmt.Errorf("%s was run with other settings than %s", shard, fs.Arg(0))
		}
		s = &cur
		files, _ := filepath.Glob(filepath.Join(shard, "*", "chunk-*.json"))
		sort.Strings(files)
		for _, f := range files {
			rel, _ := filepath.Rel(shard, f)
			dst := filepath.Join(*out, rel)
			if _, err := os.Stat(dst); err == nil {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				return err
			}
		}
	}
	gens, ev, err := openRun(rt, *out, *s, *evaluator, "auto")
	if err != nil {
		return err
	}
	return reportRun(*out, *s, gens, ev, *reference)
}

// writePlots draws alpha against gamma, alpha per AR step (the paper's Fig. 9) and FID against
// measured speedup for the run's configurations.
func writePlots(dir string, s evalSettings, gens []chunkGenerator, rows []configResult) error {
	byGroup := map[string]*render.Series{}
	var steps, tradeoff []render.Series
	for i, r := range rows {
		g := gens[i]
		sp := 1.0
		if r.Speedup != nil {
			sp = *r.Speedup
		}
		tradeoff = append(tradeoff, render.Series{Name: r.Description, X: []float64{sp}, Y: []float64{r.FID}, Points: true})
		if r.Alpha == nil {
			continue
		}
		if gv, err := strconv.Atoi(g.gamma); err == nil {
			s := byGroup[g.group]
			if s == nil {
				s = &render.Series{Name: g.group}
				byGroup[g.group] = s
			}
			s.X, s.Y = append(s.X, float64(gv)), append(s.Y, *r.Alpha)
		}
		st := render.Series{Name: r.Description}
		for k, a := range r.AlphaAtStep {
			if a >= 0 {
				st.X, st.Y = append(st.X, float64(k)), append(st.Y, a)
			}
		}
		steps = append(steps, st)
	}
	var gammas []render.Series
	for _, s := range byGroup {
		gammas = append(gammas, *s)
	}
	sample := fmt.Sprintf(", N = %d per configuration, seed %d, cfg %g", s.N, s.Seed, s.CFG)
	charts := []struct {
		file, title, x, y string
		series            []render.Series
	}{
		{"alpha_vs_gamma.png", "acceptance rate vs gamma" + sample, "gamma", "alpha", gammas},
		{"alpha_per_step.png", "acceptance rate per AR step (Fig. 9)" + sample, "AR step", "alpha", steps},
		{"fid_vs_speedup.png", "quality vs speed" + sample, "speedup vs target-only", "FID (lower is better)", tradeoff},
	}
	for _, c := range charts {
		if len(c.series) == 0 {
			continue
		}
		if err := render.Chart(filepath.Join(dir, c.file), c.title, c.x, c.y, c.series); err != nil {
			return err
		}
	}
	return nil
}
