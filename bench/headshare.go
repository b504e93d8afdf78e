package bench

import (
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"marspec/diffusion"
	"marspec/mar"
)

// timedDistilled times the distilled head's calls as head time.
type timedDistilled struct {
	mar.DistilledHead
	t *partTime
}

func (w timedDistilled) Predict(xt, t, z, zu, cfg []float32, n int, x0 []float32) error {
	defer w.t.since(time.Now())
	return w.DistilledHead.Predict(xt, t, z, zu, cfg, n, x0)
}

// samplerConfig is one entry of --samplers: sampler:steps[:eta].
type samplerConfig struct {
	text    string
	sampler diffusion.Sampler
	steps   int
	eta     float64
}

func parseSamplerConfigs(list string) ([]samplerConfig, error) {
	var out []samplerConfig
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("--samplers entry %q: want sampler:steps or sampler:steps:eta (e.g. ddpm:25, ddim:10:1, distilled:4)", item)
		}
		s, err := diffusion.ParseSampler(parts[0])
		if err != nil {
			return nil, fmt.Errorf("--samplers entry %q: %v", item, err)
		}
		c := samplerConfig{text: item, sampler: s}
		if c.steps, err = strconv.Atoi(parts[1]); err != nil {
			return nil, fmt.Errorf("--samplers entry %q: steps %q is not a whole number", item, parts[1])
		}
		if len(parts) == 3 {
			if c.eta, err = strconv.ParseFloat(parts[2], 64); err != nil {
				return nil, fmt.Errorf("--samplers entry %q: eta %q is not a number", item, parts[2])
			}
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--samplers is empty")
	}
	return out, nil
}

// ProfileSamplers times one target-only generation per head sampler (the per-step head path,
// which the CPU takes), the samplers interleaved round by round, and writes per sampler the wall
// time, the head's share (head.onnx or the distilled head) and the transformer's. With
// opening, each sampler runs twice, without the opening memo (mar.OpeningMemo) and with it
// warm (round 0 fills it, as a server's first requests for the classes do).
func ProfileSamplers(out io.Writer, m *mar.Model, pf ProfileSettings, samplers string, threads int, opening bool) error {
	configs, err := parseSamplerConfigs(samplers)
	if err != nil {
		return err
	}
	if opening { // each sampler twice: without the memo, then with it (odd entries)
		if _, ok := m.Transformer.(*mar.OpeningMemo); !ok {
			return fmt.Errorf("--opening: the target's transformer has no opening memo")
		}
		var both []samplerConfig
		for _, c := range configs {
			off := c
			off.text += ", no opening memo"
			both = append(both, off, c)
		}
		configs = both
	}
	if pf.Images < 1 || pf.Rounds < 1 {
		return fmt.Errorf("--images and --rounds must be at least 1")
	}
	opts := make([]mar.Options, len(configs))
	for i, c := range configs {
		opts[i] = mar.Options{Seed: 1, CFG: pf.CFG, NumIter: pf.NumIter, Steps: c.steps, Batch: pf.Batch, Sampler: c.sampler, Eta: c.eta}
		if err := m.Validate(&opts[i]); err != nil {
			return fmt.Errorf("--samplers entry %q: %v", c.text, err)
		}
	}
	classes := imageClasses(m, pf.Images)
	onnxTr, onnxHead, onnxDist := mar.Unmemoized(m.Transformer), m.Head, m.Distilled
	defer func(tr mar.Transformer) { m.Transformer, m.Head, m.Distilled = tr, onnxHead, onnxDist }(m.Transformer)
	// with opening, the graph under the memo is timed (its passes, not the memo's answers),
	// and one memo lives through the rounds
	var memoTime partTime
	var warmMemo *mar.OpeningMemo
	if opening {
		warmMemo = mar.NewOpeningMemo(timedTransformer{onnxTr, &memoTime}, mar.OpeningMemoBytes)
	}
	load0 := loadAvg()
	profiles := make([]pathProfile, len(configs))
	for round := 0; round <= pf.Rounds; round++ { // round 0 warms every sampler up and is not counted
		for i := range configs {
			tr, head := &partTime{}, &partTime{}
			m.Transformer, m.Head = timedTransformer{onnxTr, tr}, timedHead{onnxHead, head}
			if opening && i%2 == 1 {
				memoTime = partTime{}
				m.Transformer, tr = warmMemo, &memoTime
			}
			if onnxDist != nil {
				m.Distilled = timedDistilled{onnxDist, head}
			}
			start := time.Now()
			if _, err := m.Generate(classes, opts[i]); err != nil {
				return err
			}
			if round == 0 {
				continue
			}
			p := &profiles[i]
			p.wall += time.Since(start)
			p.tr.d, p.tr.calls = p.tr.d+tr.d, p.tr.calls+tr.calls
			p.head.d, p.head.calls = p.head.d+head.d, p.head.calls+head.calls
		}
	}
	fmt.Fprintf(out, "# marspec bench --profile --samplers: %s/%s, %d CPUs, intra-op threads %d, load average %s at start, %s at end\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), threads, load0, loadAvg())
	fmt.Fprintf(out, "# %s target-only: %d images, batch %d, num-iter %d, cfg %g; %d rounds, the samplers interleaved\n\n",
		m.Manifest.Name, pf.Images, opts[0].Batch, opts[0].NumIter, pf.CFG, pf.Rounds)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "sampler:steps\twall per generation\timages/s\tspeed vs first\thead share\ttransformer share\thead calls\ttransformer calls\t")
	base := profiles[0].wall.Seconds()
	for i, p := range profiles {
		wall := p.wall.Seconds()
		fmt.Fprintf(w, "%s\t%.3f s\t%.1f\t%.2fx\t%.1f%%\t%.1f%%\t%d\t%d\t\n", configs[i].text, wall/float64(pf.Rounds),
			float64(pf.Images*pf.Rounds)/wall, base/wall, 100*p.head.d.Seconds()/wall, 100*p.tr.d.Seconds()/wall, p.head.calls/pf.Rounds, p.tr.calls/pf.Rounds)
	}
	return w.Flush()
}
