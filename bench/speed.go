package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"marspec/mar"
)

// Named is a model under its pack name.
type Named struct {
	Name  string
	Model *mar.Model
}

// Speed times each model's transformer and head step at batches 1, 8 and 32 (reps calls each,
// the head 5 times as many) and a one-token-per-step generation of images images, writes the
// table to out, and returns each model's seconds per generated image.
func Speed(out io.Writer, models []Named, images, reps int) (map[string]float64, error) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "model\tpart\tbatch\tms/call")
	perImage := map[string]float64{}
	for _, nm := range models {
		name, m := nm.Name, nm.Model
		for _, b := range []int{1, 8, 32} {
			ms, err := timeTransformer(m, b, reps)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(w, "%s\ttransformer\t%d\t%.3f\n", name, b, ms)
		}
		for _, b := range []int{1, 8, 32} {
			ms, err := timeHead(m, b, reps*5)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(w, "%s\thead step\t%d\t%.3f\n", name, b, ms)
		}
		classes := imageClasses(m, images)
		start := time.Now()
		if _, err := m.Generate(classes, mar.Options{Seed: 1, Batch: images}); err != nil {
			return nil, err
		}
		sec := time.Since(start).Seconds()
		perImage[name] = sec / float64(images)
		fmt.Fprintf(w, "%s\tgenerate (one token per step, batch %d)\t%d\t%.1f images/s\n", name, images, images, float64(images)/sec)
	}
	w.Flush()
	return perImage, w.Flush()
}

func timeTransformer(m *mar.Model, batch, reps int) (float64, error) {
	L, D, W := m.Manifest.SeqLen(), m.Manifest.TokenDim, m.Manifest.Width
	ctx := halfKnownContexts(batch, L, D, rand.New(rand.NewPCG(1, 1)))
	z := make([]float32, batch*L*W)
	if err := ctx.Condition(mar.Unmemoized(m.Transformer), z, nil); err != nil { // warm-up
		return 0, err
	}
	start := time.Now()
	for i := 0; i < reps; i++ {
		if err := ctx.Condition(mar.Unmemoized(m.Transformer), z, nil); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Microseconds()) / 1000 / float64(reps), nil
}

func timeHead(m *mar.Model, n, reps int) (float64, error) {
	D, W := m.Manifest.TokenDim, m.Manifest.Width
	xt, t, z, out := make([]float32, n*D), make([]float32, n), make([]float32, n*W), make([]float32, n*2*D)
	for i := range t {
		t[i] = 500
	}
	if err := m.Head.Predict(xt, t, z, n, out); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := 0; i < reps; i++ {
		if err := m.Head.Predict(xt, t, z, n, out); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Microseconds()) / 1000 / float64(reps), nil
}

// imageClasses is n images' classes, cycling through the pack's: what every benchmark generates.
func imageClasses(m *mar.Model, n int) []int {
	classes := make([]int, n)
	for i := range classes {
		classes[i] = i % len(m.Manifest.Classes)
	}
	return classes
}

// halfKnownContexts is batch contexts with a random half of the L tokens known, as
// mid-generation: what the forward measurements run the transformer on.
func halfKnownContexts(batch, L, D int, rng *rand.Rand) *mar.ContextBatch {
	ctx := mar.NewContextBatch(batch, L, D)
	x := make([]float64, D)
	for r := 0; r < batch; r++ {
		for _, pos := range rng.Perm(L)[:L/2] {
			for j := range x {
				x[j] = rng.NormFloat64() * 0.5
			}
			ctx.Set(r, pos, x)
		}
	}
	return ctx
}
