package scoring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"marspec/api"
	"marspec/fid"
	"marspec/generation"
	"marspec/mar"
	"marspec/models"
)

// Models opens what a run needs by name (a pack: embedded name or folder; an evaluator); the
// CLI's runtime flags (device, threads, library) stand behind it.
type Models interface {
	Open(pack, precision string) (*mar.Model, error) // precision: mar.FP32 or mar.Int8
	OpenEvaluator(name string) (*fid.Evaluator, error)
	Provider() string // cpu or cuda[:N]: resolves the prefix-round schedule "auto"
}

// Run is a scoring run: configurations sampled chunk by chunk into a folder, resumable and
// shardable, then scored into a report (report.json, report.md, plots).
type Run struct {
	dir      string
	settings Settings
	gens     []chunkGenerator
	ev       *fid.Evaluator
}

// Open checks every configuration, opens the packs and the evaluator, and pins the settings
// in dir (a new run) or checks them against the ones there (a resumed run). schedule is the
// prefix-round schedule of spec configurations: it changes the cost, not the images, so it is
// not one of the pinned settings.
func Open(m Models, dir string, s Settings, evaluator, schedule string) (*Run, error) {
	gens, ev, err := openRun(m, dir, s, evaluator, schedule)
	if err != nil {
		return nil, err
	}
	return &Run{dir: dir, settings: s, gens: gens, ev: ev}, nil
}

// Missing is how many chunks of shard i/n are not made yet: the work a resumed run has left.
func (r *Run) Missing(shardI, shardN int) int {
	return missingChunks(r.dir, r.gens, r.settings.Chunks(), shardI, shardN)
}

// Generate makes the missing chunks of shard i/n, configuration by configuration; done hears
// of each chunk made (for progress).
func (r *Run) Generate(shardI, shardN int, done func(config string, chunk int, seconds float64)) error {
	for _, g := range r.gens {
		for c := shardI; c < r.settings.Chunks(); c += shardN {
			if fid.HasChunk(r.dir, g.name, c) {
				continue
			}
			ch, err := g.run(c, r.ev)
			if err != nil {
				return fmt.Errorf("%s chunk %d: %v", g.name, c, err)
			}
			if err := fid.WriteChunk(r.dir, g.name, ch); err != nil {
				return err
			}
			if done != nil {
				done(g.name, c, ch.Seconds)
			}
		}
	}
	return nil
}

// Report scores every configuration against the reference statistics (a .npz path, or ""
// for the embedded Fashion-MNIST test set), writes report.json, report.md and the plots, and
// prints the table to w; while chunks of other shards are missing it says so instead.
func (r *Run) Report(reference string, w io.Writer) error {
	return reportRun(r.dir, r.settings, r.gens, r.ev, reference, w)
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

// openRun pins the run's settings in its folder, opens the models and the evaluator and
// builds one generator per configuration.
func openRun(m Models, dir string, s Settings, evaluator, schedule string) ([]chunkGenerator, *fid.Evaluator, error) {
	gens, ev, err := openGenerators(m, s, evaluator, schedule)
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
func openGenerators(m Models, s Settings, evaluator, schedule string) ([]chunkGenerator, *fid.Evaluator, error) {
	precision, err := mar.ParsePrecision(s.Precision)
	if err != nil {
		return nil, nil, err
	}
	target, err := m.Open(s.Target, precision)
	if err != nil {
		return nil, nil, err
	}
	// the run's shared settings are checked as a request's are (NaN, 0 and out-of-range values
	// named by field) before any configuration or chunk
	if _, err := generation.SamplingOptions(generation.Request{GenerateRequest: api.GenerateRequest{Seed: &s.Seed,
		CFG: &s.CFG, Temperature: &s.Temperature, Steps: &s.Steps}}, target.Manifest); err != nil {
		return nil, nil, err
	}
	draft, err := m.Open(s.Draft, precision)
	if err != nil {
		return nil, nil, err
	}
	// a configuration's precision= opens the packs again at it, once per precision
	at := map[string][2]*mar.Model{precision: {target, draft}}
	packsAt := func(p string) (*mar.Model, *mar.Model, error) {
		if pair, ok := at[p]; ok {
			return pair[0], pair[1], nil
		}
		t, err := m.Open(s.Target, p)
		if err != nil {
			return nil, nil, err
		}
		d, err := m.Open(s.Draft, p)
		if err != nil {
			return nil, nil, err
		}
		at[p] = [2]*mar.Model{t, d}
		return t, d, nil
	}
	ev, err := m.OpenEvaluator(evaluator)
	if err != nil {
		return nil, nil, err
	}
	gens := make([]chunkGenerator, len(s.Configs))
	for i, c := range s.Configs {
		if gens[i], err = newChunkGenerator(c, s, target, draft, packsAt, schedule, m.Provider()); err != nil {
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

func reportRun(dir string, s Settings, gens []chunkGenerator, ev *fid.Evaluator, reference string, w io.Writer) error {
	chunks := (s.N + s.Chunk - 1) / s.Chunk
	ref, err := loadReference(reference, ev)
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
			fmt.Fprintf(w, "%s: %d of %d chunks present; the report waits for the other shards (marspec eval merge)\n", g.name, chunks-len(missing), chunks)
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
	_, err = io.WriteString(w, md)
	return err
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

func markdownTable(s Settings, rows []configResult) string {
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
