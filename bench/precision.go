package bench

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"marspec/mar"
)

// PrecisionSettings are what `marspec bench --precisions` times.
type PrecisionSettings struct {
	Batches    []int // transformer batches (images) to time
	HeadRows   []int // head batches (token rows) to time
	Reps       int   // calls per forward measurement
	Rounds     int   // measurements per model, taken in turns with the other models
	GenBatches []int // one generation measurement per entry: that many images in one batch
	NumIter    int   // AR steps of the generations (0 = one token per step)
	Steps      int   // diffusion steps of the generations (0 = the pack's)
}

// ComparePrecisions times the same pack opened at several precisions side by side: every round
// measures each model once, in turns (the order reversed every other round), so a loaded
// machine slows all of them alike; it writes the median of the rounds and each model's speedup
// over the first. Before timing it writes how far each model's outputs are from the first's on
// the same inputs (the transformer's z, the head's output), so a speedup is never read without
// its error. One model alone gets its times only: what a GPU run needs to set a pass over
// gamma+1 rows beside a pass over one.
func ComparePrecisions(out io.Writer, models []Named, set PrecisionSettings) error {
	if len(models) < 1 || set.Rounds < 1 || set.Reps < 1 {
		return fmt.Errorf("bench --precisions: want one or more precisions (one: its times alone; more: side by side with the first), --rounds and --reps at least 1")
	}
	if len(models) > 1 {
		if err := writeFidelity(out, models); err != nil {
			return err
		}
	}
	var parts []measure
	for _, b := range set.Batches {
		parts = append(parts, measure{transformerPass, "transformer pass (ms)", b})
	}
	for _, b := range set.HeadRows {
		parts = append(parts, measure{headStep, "head step (ms)", b})
	}
	schedule := "one token per step"
	if set.NumIter > 0 {
		schedule = fmt.Sprintf("num_iter %d", set.NumIter)
	}
	steps := "the pack's steps"
	if set.Steps > 0 {
		steps = fmt.Sprintf("steps %d", set.Steps)
	}
	for _, b := range set.GenBatches {
		parts = append(parts, measure{generateImages, fmt.Sprintf("generate %s, %s (images/s)", schedule, steps), b})
	}
	samples := make([]map[measure][]float64, len(models))
	for i := range samples {
		samples[i] = map[measure][]float64{}
	}
	for r := 0; r < set.Rounds; r++ {
		for j := range models {
			i := j
			if r%2 == 1 {
				i = len(models) - 1 - j
			}
			m := models[i].Model
			for _, k := range parts {
				v, err := k.run(m, set)
				if err != nil {
					return fmt.Errorf("%s: %w", models[i].Name, err)
				}
				samples[i][k] = append(samples[i][k], v)
			}
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "part\tbatch")
	for _, m := range models {
		fmt.Fprintf(w, "\t%s", m.Name)
	}
	for _, m := range models[1:] {
		fmt.Fprintf(w, "\tspeedup %s", m.Name)
	}
	fmt.Fprintf(w, "\t(median of %d rounds, in turns)\n", set.Rounds)
	for _, k := range parts {
		fmt.Fprintf(w, "%s\t%d", k.label, k.size)
		base := median(samples[0][k])
		for i := range models {
			fmt.Fprintf(w, "\t%.3f", median(samples[i][k]))
		}
		for i := 1; i < len(models); i++ {
			v := median(samples[i][k])
			speedup := base / v // times: fewer is faster
			if k.kind == generateImages {
				speedup = v / base // images/s: more is faster
			}
			fmt.Fprintf(w, "\t%.2fx", speedup)
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

// measure is one row of the table: what is timed, at which batch.
type measure struct {
	kind  int
	label string
	size  int
}

const (
	transformerPass = iota
	headStep
	generateImages
)

// run is one measurement: ms per call for a forward part, images/s for a generation.
func (k measure) run(m *mar.Model, set PrecisionSettings) (float64, error) {
	switch k.kind {
	case transformerPass:
		return timeTransformer(m, k.size, set.Reps)
	case headStep:
		return timeHead(m, k.size, set.Reps*5)
	}
	classes := imageClasses(m, k.size)
	start := time.Now()
	if _, err := m.Generate(classes, mar.Options{Seed: 1, Batch: k.size, NumIter: set.NumIter, Steps: set.Steps}); err != nil {
		return 0, err
	}
	return float64(k.size) / time.Since(start).Seconds(), nil
}

// writeFidelity runs every model's transformer (batch 2, half the tokens known) and head (8
// rows at three timesteps) on the same random inputs and writes the largest absolute and the
// relative RMS difference from the first model's outputs.
func writeFidelity(out io.Writer, models []Named) error {
	ref, err := forwardOutputs(models[0].Model)
	if err != nil {
		return fmt.Errorf("%s: %w", models[0].Name, err)
	}
	for _, nm := range models[1:] {
		got, err := forwardOutputs(nm.Model)
		if err != nil {
			return fmt.Errorf("%s: %w", nm.Name, err)
		}
		for i, part := range []string{"transformer z", "head output"} {
			maxAbs, rel := compareOutputs(ref[i], got[i])
			fmt.Fprintf(out, "%s vs %s, %s: max |difference| %.4g, RMS difference / RMS %.4g\n", nm.Name, models[0].Name, part, maxAbs, rel)
		}
	}
	fmt.Fprintln(out)
	return nil
}

func forwardOutputs(m *mar.Model) ([2][]float32, error) {
	man := m.Manifest
	L, D, W := man.SeqLen(), man.TokenDim, man.Width
	rng := rand.New(rand.NewPCG(7, 7))
	const batch = 2
	ctx := halfKnownContexts(batch, L, D, rng)
	z := make([]float32, batch*L*W)
	if err := ctx.Condition(mar.Unmemoized(m.Transformer), z, nil); err != nil {
		return [2][]float32{}, err
	}
	const n = 8
	xt, t, out := make([]float32, n*D), make([]float32, n), make([]float32, n*2*D)
	for i := range xt {
		xt[i] = float32(rng.NormFloat64())
	}
	for i := range t {
		t[i] = float32([]int{50, 500, 950}[i%3])
	}
	if err := m.Head.Predict(xt, t, z[:n*W], n, out); err != nil { // the transformer's own z as condition
		return [2][]float32{}, err
	}
	return [2][]float32{z, out}, nil
}

// compareOutputs is the largest absolute difference and RMS(got-ref)/RMS(ref).
func compareOutputs(ref, got []float32) (maxAbs, rel float64) {
	var d2, r2 float64
	for i := range ref {
		d := float64(got[i]) - float64(ref[i])
		maxAbs = max(maxAbs, math.Abs(d))
		d2 += d * d
		r2 += float64(ref[i]) * float64(ref[i])
	}
	return maxAbs, math.Sqrt(d2 / max(r2, 1e-30))
}
