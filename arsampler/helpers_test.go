package arsampler

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"marspec/mar"
	"marspec/mar/analytic"
)

const (
	testL     = 6
	testD     = 2
	testSteps = 10
)

func targetParams() analytic.Params {
	return analytic.Params{Name: "target", SeqLen: testL, TokenDim: testD, Base: []float64{0.3, -0.2, 0.5, 0, -0.4, 0.1},
		ClassShift: 0.02, Coupling: 0.6, Scale: 0.01, Steps: testSteps, Classes: 3}
}

// A draft close to the target but not equal: shifted means, wider, weaker coupling. The last
// diffusion step's standard deviation is ~0.006 whatever the data, so draft and target
// trajectories must end within a few thousandths of each other for drafts to be accepted; the
// data scale is kept as small (0.01) so that such differences are many standard errors wide
// and a sampler that leans toward the draft is caught.
func draftParams() analytic.Params {
	p := targetParams()
	p.Name = "draft"
	p.Base = []float64{0.305, -0.196, 0.494, 0.004, -0.4, 0.106}
	p.Coupling = 0.55
	p.Scale = 0.013
	p.VarInterp = 0.05 // a slightly different variance makes the paper's Sigma differ from 1
	return p
}

func jobs(n int) []Job {
	js := make([]Job, n)
	for i := range js {
		js[i] = Job{Index: i, Class: i % 3}
	}
	return js
}

func runSpec(t *testing.T, target, draft *mar.Model, cfg Config, n, batch int) ([]Result, *Engine) {
	t.Helper()
	e, err := NewEngine(target, draft, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(jobs(n), batch)
	if err != nil {
		t.Fatal(err)
	}
	return res, e
}

func runTarget(t *testing.T, target *mar.Model, seed uint64, n int) [][]float32 {
	t.Helper()
	classes := make([]int, n)
	for i := range classes {
		classes[i] = i % 3
	}
	imgs, err := target.Generate(classes, mar.Options{Seed: seed, Steps: testSteps, FinalStepNoise: true, Batch: 256})
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, n)
	for i, im := range imgs {
		out[i] = im.Tokens
	}
	return out
}

func tokensOf(rs []Result) [][]float32 {
	out := make([][]float32, len(rs))
	for i, r := range rs {
		out[i] = r.Tokens
	}
	return out
}

// twoSampleReport compares two samples of sequences: the largest |z| of per-coordinate mean
// differences, the largest relative difference of per-coordinate variances, and the largest
// two-sample Kolmogorov-Smirnov statistic over random projections scaled by sqrt(nm/(n+m)).
type twoSampleReport struct {
	maxMeanZ, maxVarRel, maxKS float64
}

func compareSamples(a, b [][]float32, projections int) twoSampleReport {
	dim := len(a[0])
	var rep twoSampleReport
	for j := 0; j < dim; j++ {
		ma, va := moments(a, func(x []float32) float64 { return float64(x[j]) })
		mb, vb := moments(b, func(x []float32) float64 { return float64(x[j]) })
		z := math.Abs(ma-mb) / math.Sqrt(va/float64(len(a))+vb/float64(len(b)))
		rep.maxMeanZ = math.Max(rep.maxMeanZ, z)
		rep.maxVarRel = math.Max(rep.maxVarRel, math.Abs(va/vb-1))
	}
	rng := rand.New(rand.NewPCG(99, 1))
	for p := 0; p < projections; p++ {
		w := make([]float64, dim)
		for j := range w {
			w[j] = rng.NormFloat64()
		}
		proj := func(x []float32) float64 {
			s := 0.0
			for j := range w {
				s += w[j] * float64(x[j])
			}
			return s
		}
		rep.maxKS = math.Max(rep.maxKS, ksStatistic(mapf(a, proj), mapf(b, proj)))
	}
	return rep
}

func moments(xs [][]float32, f func([]float32) float64) (mean, variance float64) {
	for _, x := range xs {
		mean += f(x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		d := f(x) - mean
		variance += d * d
	}
	return mean, variance / float64(len(xs)-1)
}

func mapf(xs [][]float32, f func([]float32) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// ksStatistic is sqrt(nm/(n+m)) * sup |F_a - F_b|; under the null it exceeds 1.95 with
// probability about 0.001.
func ksStatistic(a, b []float64) float64 {
	a, b = append([]float64(nil), a...), append([]float64(nil), b...)
	sort.Float64s(a)
	sort.Float64s(b)
	i, j, d := 0, 0, 0.0
	for i < len(a) && j < len(b) {
		if a[i] <= b[j] {
			i++
		} else {
			j++
		}
		d = math.Max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	n, m := float64(len(a)), float64(len(b))
	return d * math.Sqrt(n*m/(n+m))
}
