package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"marspec/diffusion"
	"marspec/mar"
)

// ProfileSettings are bench --profile's settings: one target-only generation, timed per part.
// ProfileSettings are what `bench --profile` generates.
type ProfileSettings struct {
	Images, Batch, NumIter, Rounds int // Batch 0 = all images at once; NumIter 0 = one token per step
	CFG                            float64
	// HeadCalls skips the whole generations: only the table of one reverse diffusion per token
	// count, per-step against fused (a MAR-B generation at its paper settings takes minutes)
	HeadCalls bool
}

// partTime adds up the time spent inside one model part's calls.
type partTime struct {
	d     time.Duration
	calls int
}

func (p *partTime) since(start time.Time) { p.d += time.Since(start); p.calls++ }

// The wrappers time every call of a part; bench installs them only with --profile, so other
// runs never pay for them.
type timedTransformer struct {
	mar.Transformer
	t *partTime
}

func (w timedTransformer) Forward(tokens, mask []float32, classIDs []int64, drop []float32, batch int, z []float32) error {
	defer w.t.since(time.Now())
	return w.Transformer.Forward(tokens, mask, classIDs, drop, batch, z)
}

// ForwardPicked times the pass that hands back only the picked rows (mar.RowPicker), so a
// profile measures the path a generation takes.
func (w timedTransformer) ForwardPicked(tokens, mask []float32, classIDs []int64, drop []float32, batch int, at [][2]int, z []float32) error {
	defer w.t.since(time.Now())
	return mar.ForwardPicked(w.Transformer, tokens, mask, classIDs, drop, batch, at, z)
}

// timedHead hides any fused graph: the Denoiser takes the per-step path.
type timedHead struct {
	mar.Head
	t *partTime
}

func (w timedHead) Predict(xt, t, z []float32, n int, out []float32) error {
	defer w.t.since(time.Now())
	return w.Head.Predict(xt, t, z, n, out)
}

// timedLoopHead offers the fused graph, timed.
type timedLoopHead struct {
	timedHead
	loop mar.LoopRunner
}

func (w timedLoopHead) HeadLoop() mar.LoopRunner { return timedLoop{w.loop, w.t} }

type timedLoop struct {
	mar.LoopRunner
	t *partTime
}

func (w timedLoop) RunLoop(n, steps, halves int, fill func(mar.LoopInputs), read func(mar.LoopOutputs)) error {
	defer w.t.since(time.Now())
	return w.LoopRunner.RunLoop(n, steps, halves, fill, read)
}

// pathProfile accumulates one head path's rounds.
type pathProfile struct {
	name        string
	wall        time.Duration
	tr, head    partTime
	tokens      []float32
	fixedPerRun time.Duration // the head graph's fixed cost per call
}

// Profile times one target-only generation on the per-step and the fused head paths,
// interleaved, and writes the shares of transformer, head, ONNX Runtime fixed cost and Go to w.
func Profile(out io.Writer, m *mar.Model, pf ProfileSettings, steps int, threads int) error {
	// the pack's fused graph, whether or not sampling on this device takes it
	var loop mar.LoopRunner
	if lh, ok := m.Head.(interface {
		FusedLoop() (mar.LoopRunner, error)
	}); ok {
		var err error
		if loop, err = lh.FusedLoop(); err != nil {
			return err
		}
	}
	if loop == nil {
		return fmt.Errorf("pack %s has no head_loop graph (scripts/packs/fuse_head.py adds one): nothing to compare", m.Manifest.Name)
	}
	if pf.Images < 1 || pf.Rounds < 1 {
		return fmt.Errorf("--images and --rounds must be at least 1")
	}
	onnxTr, onnxHead := mar.Unmemoized(m.Transformer), m.Head
	defer func(tr mar.Transformer) { m.Transformer, m.Head = tr, onnxHead }(m.Transformer)
	opt := mar.Options{Seed: 1, CFG: pf.CFG, NumIter: pf.NumIter, Steps: steps, Batch: pf.Batch}
	if err := m.Validate(&opt); err != nil {
		return err
	}
	steps = opt.Steps
	if pf.HeadCalls {
		fmt.Fprintf(out, "# marspec bench --profile --head-calls: %s/%s, %d CPUs, intra-op threads %d, load average %s; %s, guidance %g\n\n",
			runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), threads, loadAvg(), m.Manifest.Name, opt.CFG)
		return diffusionTable(out, m, loop, pf, opt)
	}
	classes := imageClasses(m, pf.Images)
	load0 := loadAvg()
	paths := []*pathProfile{{name: "per-step head"}, {name: "fused head"}}
	for round := 0; round <= pf.Rounds; round++ { // round 0 warms both paths up and is not counted
		for i, p := range paths {
			tr, head := &partTime{}, &partTime{}
			m.Transformer = timedTransformer{onnxTr, tr}
			if i == 0 {
				m.Head = timedHead{onnxHead, head}
			} else {
				m.Head = timedLoopHead{timedHead{onnxHead, head}, loop}
			}
			start := time.Now()
			imgs, err := m.Generate(classes, opt)
			if err != nil {
				return err
			}
			if round == 0 {
				p.tokens = imgs[0].Tokens
				continue
			}
			p.wall += time.Since(start)
			p.tr.d, p.tr.calls = p.tr.d+tr.d, p.tr.calls+tr.calls
			p.head.d, p.head.calls = p.head.d+head.d, p.head.calls+head.calls
		}
	}
	m.Transformer, m.Head = onnxTr, onnxHead
	fixed, err := measureFixedCosts(m, loop, steps, opt.CFG != 1)
	if err != nil {
		return err
	}
	paths[0].fixedPerRun, paths[1].fixedPerRun = fixed.head, fixed.loop
	load1 := loadAvg()

	fmt.Fprintf(out, "# marspec bench --profile: %s/%s, %d CPUs, provider cpu, intra-op threads %d, load average %s at start, %s at end\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), threads, load0, load1)
	fmt.Fprintf(out, "# %s target-only: %d images, batch %d, num-iter %d, steps %d, cfg %g; %d rounds, the two paths interleaved\n\n",
		m.Manifest.Name, pf.Images, opt.Batch, opt.NumIter, opt.Steps, opt.CFG, pf.Rounds)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "share of wall time\t"+paths[0].name+"\t"+paths[1].name+"\t")
	line := func(label string, f func(p *pathProfile) string) {
		fmt.Fprintf(w, "%s\t%s\t%s\t\n", label, f(paths[0]), f(paths[1]))
	}
	share := func(part func(p *pathProfile) float64) func(p *pathProfile) string {
		return func(p *pathProfile) string { return fmt.Sprintf("%.1f%%", 100*part(p)/p.wall.Seconds()) }
	}
	trFixed := func(p *pathProfile) float64 { return float64(p.tr.calls) * fixed.transformer.Seconds() }
	headFixed := func(p *pathProfile) float64 { return float64(p.head.calls) * p.fixedPerRun.Seconds() }
	line("transformer (compute)", share(func(p *pathProfile) float64 { return p.tr.d.Seconds() - trFixed(p) }))
	line("diffusion head (compute)", share(func(p *pathProfile) float64 { return p.head.d.Seconds() - headFixed(p) }))
	line("ORT fixed cost per call", share(func(p *pathProfile) float64 { return trFixed(p) + headFixed(p) }))
	line("Go bookkeeping (the rest)", share(func(p *pathProfile) float64 { return p.wall.Seconds() - p.tr.d.Seconds() - p.head.d.Seconds() }))
	line("wall per generation", func(p *pathProfile) string {
		return fmt.Sprintf("%.3f s", p.wall.Seconds()/float64(pf.Rounds))
	})
	line("transformer calls", func(p *pathProfile) string { return fmt.Sprint(p.tr.calls / pf.Rounds) })
	line("head calls", func(p *pathProfile) string { return fmt.Sprint(p.head.calls / pf.Rounds) })
	w.Flush()
	fmt.Fprintf(out, "\nfused / per-step wall time: %.3f (speedup %.2fx); largest token difference between the paths: %.2g\n",
		paths[1].wall.Seconds()/paths[0].wall.Seconds(), paths[0].wall.Seconds()/paths[1].wall.Seconds(),
		maxDiff32(paths[0].tokens, paths[1].tokens))
	fmt.Fprintf(out, "fixed cost per call (time at 0 rows, extrapolated from 1 and 2 rows, median of %d): transformer %.3f ms, head step %.3f ms, fused head (%d steps) %.3f ms\n\n",
		fixedReps, ms(fixed.transformer), ms(fixed.head), steps, ms(fixed.loop))
	return diffusionTable(out, m, loop, pf, opt)
}

// fusedDenoiser is a denoiser whose fused path runs loop, where sampling on this device would
// take it or not (the CPU samples per step: its ONNXHead offers no loop).
func fusedDenoiser(m *mar.Model, loop mar.LoopRunner, opt mar.Options) (*mar.Denoiser, error) {
	den, err := m.NewDenoiser(opt, false)
	if err != nil {
		return nil, err
	}
	den.Head = timedLoopHead{timedHead{m.Head, &partTime{}}, loop}
	return den, nil
}

// diffusionTable times one reverse diffusion of N tokens both ways, interleaved, for the
// batch sizes of interest and the row counts the chosen num-iter produces.
func diffusionTable(out io.Writer, m *mar.Model, loop mar.LoopRunner, pf ProfileSettings, opt mar.Options) error {
	sizes := []int{1, 8, 32}
	for _, s := range mar.StepSizes(m.Manifest.SeqLen(), opt.NumIter) {
		sizes = append(sizes, s*opt.Batch)
	}
	sort.Ints(sizes)
	sizes = slices.Compact(sizes)
	den, err := fusedDenoiser(m, loop, opt)
	if err != nil {
		return err
	}
	guided := opt.CFG != 1
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "tokens\tper-step ms\tfused ms\tratio\t(reverse diffusion, %d steps, guided %v, median of %d interleaved)\n",
		opt.Steps, guided, pf.Rounds+2)
	for _, n := range sizes {
		rows := profileRows(m, n, opt.Steps, guided)
		x0 := mar.Rows(n, m.Manifest.TokenDim)
		var times [2][]float64
		for rep := 0; rep <= pf.Rounds+2; rep++ {
			for i := range times {
				den.PerStep = i == 0
				start := time.Now()
				if err := den.Run(rows, x0, nil); err != nil {
					return err
				}
				if rep > 0 {
					times[i] = append(times[i], ms(time.Since(start)))
				}
			}
		}
		a, b := median(times[0]), median(times[1])
		fmt.Fprintf(w, "%d\t%.2f\t%.2f\t%.2f\t\n", n, a, b, b/a)
	}
	return w.Flush()
}

// profileRows are n tokens with real conditioning (the transformer on an empty context).
func profileRows(m *mar.Model, n, steps int, guided bool) []mar.DenoiseRow {
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	ctx := mar.NewContextBatch(1, L, D)
	z, zu := make([]float32, L*W), make([]float32, L*W)
	ctx.Condition(m.Transformer, z, zu)
	rows := make([]mar.DenoiseRow, n)
	for r := range rows {
		pos := r % L
		rows[r] = mar.DenoiseRow{Z: z[pos*W : (pos+1)*W], CFG: 2, Noise: diffusion.NewTokenNoise(1, r, pos, steps, D)}
		if guided {
			rows[r].ZUncond = zu[pos*W : (pos+1)*W]
		}
	}
	return rows
}

const fixedReps = 15

type fixedCosts struct{ transformer, head, loop time.Duration }

// measureFixedCosts estimates what a call costs regardless of its rows (cgo, ONNX Runtime's
// run set-up, per-node dispatch): the time at 1 and 2 rows, extrapolated linearly to 0.
func measureFixedCosts(m *mar.Model, loop mar.LoopRunner, steps int, guided bool) (fixedCosts, error) {
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	ctx1, ctx2 := mar.NewContextBatch(1, L, D), mar.NewContextBatch(2, L, D)
	z := make([]float32, 2*L*W)
	xt, tt, zh, out := make([]float32, 2*D), make([]float32, 2), make([]float32, 2*W), make([]float32, 4*D)
	opt := mar.Options{Steps: steps, Temperature: 1}
	den, err := fusedDenoiser(m, loop, opt)
	if err != nil {
		return fixedCosts{}, err
	}
	rows := [3][]mar.DenoiseRow{nil, profileRows(m, 1, steps, guided), profileRows(m, 2, steps, guided)}
	x0 := mar.Rows(2, D)
	calls := []func(n int) error{
		func(n int) error { return []*mar.ContextBatch{nil, ctx1, ctx2}[n].Condition(m.Transformer, z, nil) },
		func(n int) error { return m.Head.Predict(xt, tt, zh, n, out) },
		func(n int) error { den.PerStep = false; return den.Run(rows[n], x0, nil) },
	}
	var res [3]time.Duration
	for i, call := range calls {
		var t1, t2 []float64
		for rep := 0; rep <= fixedReps; rep++ {
			for n := 1; n <= 2; n++ {
				start := time.Now()
				if err := call(n); err != nil {
					return fixedCosts{}, err
				}
				if rep > 0 && n == 1 {
					t1 = append(t1, time.Since(start).Seconds())
				} else if rep > 0 {
					t2 = append(t2, time.Since(start).Seconds())
				}
			}
		}
		res[i] = time.Duration(max(0, 2*median(t1)-median(t2)) * float64(time.Second))
	}
	return fixedCosts{res[0], res[1], res[2]}, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

func maxDiff32(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, abs64(float64(a[i])-float64(b[i])))
	}
	return d
}

func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// loadAvg is the 1-minute load average, or "?" where /proc does not say.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}
