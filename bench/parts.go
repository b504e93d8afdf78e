package bench

import (
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"marspec/mar"
	"marspec/onnxrt"
)

// PartsSettings are what `bench --parts` generates: target-only images at MAR's schedule,
// the same call sequence the official sampler makes, timed per model part.
type PartsSettings struct {
	Images, Batch, NumIter, Steps, Rounds int // Batch 0 = all images at once
	CFG                                   float64
	// Cache is the cache across AR steps to generate with (docs/cache.md); off by default.
	Cache mar.CacheSettings
	// NoWarm skips the untimed round (one image unless WarmAll): at MAR-B size with num_iter 64 or more it
	// takes minutes, and what it warms (pre-packing, the arena) is under a second of that.
	NoWarm bool
	// WarmAll makes the untimed round generate every image instead of one. On a GPU, where a
	// call's cost is nearly flat in its rows, one image costs about what the batch does, and it
	// would open unrolled head sessions at row counts the timed round never calls.
	WarmAll bool
	// FusedHead times the pack's fused reverse diffusion (head_loop.onnx, one call per AR
	// step) as the head instead of the per-step path: the head's share of a generation as a
	// GPU runs it. A pack without the graph is refused.
	FusedHead bool
}

// PartTiming is one model part over a timed round: its calls and their mean time.
type PartTiming struct {
	Calls     int     `json:"calls"` // in one generation of all the images
	MsPerCall float64 `json:"ms_per_call"`
	Share     float64 `json:"share"` // of the round's wall time
}

// PartsReport is one `bench --parts` measurement, printed as a table or as JSON for
// scripts/bench/realsize_cpu_bench.py to set beside the official code's parts.
type PartsReport struct {
	Pack            string     `json:"pack"`
	Images          int        `json:"images"`
	Batch           int        `json:"batch"`
	NumIter         int        `json:"num_iter"`
	Steps           int        `json:"steps"`
	CFG             float64    `json:"cfg"`
	Rounds          int        `json:"rounds"`
	Threads         int        `json:"threads"`
	Tuning          string     `json:"ort_tuning"`
	OpenSeconds     float64    `json:"open_seconds"` // pack read and sessions created
	ImagesPerSecond float64    `json:"images_per_second"`
	Cache           string     `json:"cache"`       // the cache's settings, "off" without it
	HeadPath        string     `json:"head_path"`   // "per-step" or "fused" (head_step then times one whole reverse diffusion)
	Transformer     PartTiming `json:"transformer"` // one pass over the batch (guided rows included)
	// CachedPass is one call of the cached graph (a full or a lazy step's pass over the batch);
	// with the cache, the transformer's time is Transformer's and CachedPass's together.
	CachedPass  PartTiming `json:"cached_pass"`
	HeadStep    PartTiming `json:"head_step"` // one diffusion step over an AR step's tokens
	Decode      PartTiming `json:"decode"`    // one image through the tokenizer
	LoadAverage [2]string  `json:"load_average"`
	// UnrolledSessions are the unrolled fused head graphs that ran, with their row counts
	// (scripts/packs/unroll_head.py); none where the rolled loop or the per-step head ran
	UnrolledSessions []string `json:"unrolled_sessions,omitempty"`
}

// timedTokenizer times the decoder, which Generate calls once per finished image.
type timedTokenizer struct {
	mar.Tokenizer
	t *partTime
}

func (w timedTokenizer) Decode(tokens []float32) []uint8 {
	defer w.t.since(time.Now())
	return w.Tokenizer.Decode(tokens)
}

// Parts generates pf.Images target-only images pf.Rounds times (after one untimed round)
// with every transformer, head and decoder call timed, and reports the median round.
func Parts(m *mar.Model, pf PartsSettings) (PartsReport, error) {
	if pf.Images < 1 || pf.Rounds < 1 {
		return PartsReport{}, fmt.Errorf("--images and --rounds must be at least 1")
	}
	opt := mar.Options{Seed: 1, CFG: pf.CFG, NumIter: pf.NumIter, Steps: pf.Steps, Batch: pf.Batch, Cache: pf.Cache}
	if err := m.Validate(&opt); err != nil {
		return PartsReport{}, err
	}
	classes := imageClasses(m, pf.Images)
	onnxTr, onnxHead, tok := mar.Unmemoized(m.Transformer), m.Head, m.Tokenizer
	var loop mar.LoopRunner
	if pf.FusedHead {
		lh, ok := onnxHead.(interface {
			FusedLoop() (mar.LoopRunner, error)
		})
		if ok {
			var err error
			if loop, err = lh.FusedLoop(); err != nil {
				return PartsReport{}, err
			}
		}
		if loop == nil {
			return PartsReport{}, fmt.Errorf("--fused-head: pack %s has no head_loop graph (scripts/packs/fuse_head.py adds one)", m.Manifest.Name)
		}
	}
	// The unrolled fused head opens a session per row count on first use (and CUDA captures a
	// graph there): made now, the timed rounds do not pay for it.
	batch := opt.Batch
	if batch == 0 {
		batch = pf.Images
	}
	if err := m.PrepareUnrolled(opt, batch); err != nil {
		return PartsReport{}, err
	}
	defer func(tr mar.Transformer) { m.Transformer, m.Head, m.Tokenizer = tr, onnxHead, tok }(m.Transformer)
	if m.Cached != nil {
		defer func() { m.Cached.OnRun = nil }()
	}
	type round struct {
		wall                  time.Duration
		tr, cached, head, dec partTime
	}
	var rounds []round
	load0 := loadAvg()
	first := 0 // round 0, one image, warms up (pre-packing, arena) and is not kept
	if pf.NoWarm {
		first = 1
	}
	for r := first; r <= pf.Rounds; r++ {
		var rd round
		imgs := classes
		if r == 0 && !pf.WarmAll {
			imgs = classes[:1]
		}
		m.Transformer = timedTransformer{onnxTr, &rd.tr}
		m.Head = timedHead{onnxHead, &rd.head} // hides a fused head graph: the per-step path, as on the CPU
		if loop != nil {
			m.Head = timedLoopHead{timedHead{onnxHead, &rd.head}, loop}
		}
		m.Tokenizer = timedTokenizer{tok, &rd.dec}
		if m.Cached != nil {
			m.Cached.OnRun = func(d time.Duration) { rd.cached.d += d; rd.cached.calls++ }
		}
		start := time.Now()
		if _, err := m.Generate(imgs, opt); err != nil {
			return PartsReport{}, err
		}
		rd.wall = time.Since(start)
		if r > 0 {
			rounds = append(rounds, rd)
		}
	}
	sort.Slice(rounds, func(i, j int) bool { return rounds[i].wall < rounds[j].wall })
	med := rounds[len(rounds)/2]
	timing := func(p partTime) PartTiming {
		if p.calls == 0 {
			return PartTiming{}
		}
		return PartTiming{Calls: p.calls, MsPerCall: ms(p.d) / float64(p.calls),
			Share: p.d.Seconds() / med.wall.Seconds()}
	}
	return PartsReport{Pack: m.Manifest.Name, Images: pf.Images, Batch: opt.Batch, NumIter: opt.NumIter, Steps: opt.Steps,
		CFG: pf.CFG, Rounds: pf.Rounds, ImagesPerSecond: float64(pf.Images) / med.wall.Seconds(), Cache: opt.Cache.String(),
		HeadPath:    map[bool]string{false: "per-step", true: "fused"}[loop != nil],
		Transformer: timing(med.tr), CachedPass: timing(med.cached), HeadStep: timing(med.head), Decode: timing(med.dec),
		LoadAverage: [2]string{load0, loadAvg()}, UnrolledSessions: unrolledSessions(onnxHead)}, nil
}

// unrolledSessions lists the unrolled fused head graphs the head opened (mar.ONNXHead).
func unrolledSessions(h mar.Head) []string {
	if u, ok := h.(interface{ UnrolledSessions() []string }); ok {
		return u.UnrolledSessions()
	}
	return nil
}

// PrintParts writes a PartsReport as a table, with the GEMM peak when one was measured.
func PrintParts(out io.Writer, r PartsReport, peak *onnxrt.GEMMResult) error {
	fmt.Fprintf(out, "# marspec bench --parts: %s/%s, %d CPUs, intra-op threads %d, ort tuning %s, load average %s at start, %s at end\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), r.Threads, r.Tuning, r.LoadAverage[0], r.LoadAverage[1])
	fmt.Fprintf(out, "# %s target-only: %d images, batch %d (0 = all), num-iter %d, steps %d, cfg %g, cache %s, %s head; median of %d rounds; pack opened in %.2f s\n\n",
		r.Pack, r.Images, r.Batch, r.NumIter, r.Steps, r.CFG, r.Cache, r.HeadPath, r.Rounds, r.OpenSeconds)
	if len(r.UnrolledSessions) > 0 {
		fmt.Fprintf(out, "# unrolled fused head sessions: %s\n\n", strings.Join(r.UnrolledSessions, ", "))
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "part\tcalls\tms per call\tshare of wall time\t")
	type row struct {
		name string
		t    PartTiming
	}
	rows := []row{{"transformer pass", r.Transformer}}
	if r.CachedPass.Calls > 0 { // the cache's full and lazy passes, beside its plain ones
		rows = append(rows, row{"cached graph pass", r.CachedPass})
	}
	for _, p := range append(rows, row{"head step", r.HeadStep}, row{"decode", r.Decode}) {
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%.1f%%\t\n", p.name, p.t.Calls, p.t.MsPerCall, 100*p.t.Share)
	}
	fmt.Fprintf(w, "images/s\t\t%.4f\t\t\n", r.ImagesPerSecond)
	if err := w.Flush(); err != nil {
		return err
	}
	if peak != nil {
		fmt.Fprintf(out, "\nfp32 GEMM in ONNX Runtime (MatMul %dx%d by a constant %dx%d, median): %.2f ms, %.1f GFLOP/s\n",
			peak.M, peak.K, peak.K, peak.N, peak.MsPerCall, peak.GFLOPs)
	}
	return nil
}
