package arsampler

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func normPDF(x, m, sd float64) float64 {
	z := (x - m) / sd
	return math.Exp(-z*z/2) / (sd * math.Sqrt(2*math.Pi))
}

// The resampler draws from norm(max(0, Sigma*p - q)). 1-D: 40000 draws compared with the CDF
// of that density integrated numerically (trapezoid, step 1e-3); the KS distance must stay
// below 0.0098 (p ~ 0.001 at n = 40000).
func TestResamplerMatchesModifiedDistribution1D(t *testing.T) {
	pm, psd, qm, qsd := 0.0, 1.0, 0.8, 0.7
	for _, sigma := range []float64{1, 1.5, 0.7} {
		rng := rand.New(rand.NewPCG(11, uint64(sigma*10)))
		const n = 40000
		xs := make([]float64, n)
		tries := 0
		for i := range xs {
			r := ResampleModified(rng, []float64{pm}, []float64{2 * math.Log(psd)}, []float64{qm}, []float64{2 * math.Log(qsd)}, math.Log(sigma), 10000)
			if r.BoundHit {
				t.Fatal("bound hit with a generous bound")
			}
			xs[i] = r.X[0]
			tries += r.Tries
		}
		sort.Float64s(xs)
		// numeric CDF of max(0, sigma p - q)
		const lo, hi, h = -8.0, 8.0, 1e-3
		var grid, cdf []float64
		total := 0.0
		prev := math.Max(0, sigma*normPDF(lo, pm, psd)-normPDF(lo, qm, qsd))
		for x := lo + h; x <= hi; x += h {
			cur := math.Max(0, sigma*normPDF(x, pm, psd)-normPDF(x, qm, qsd))
			total += (prev + cur) / 2 * h
			grid = append(grid, x)
			cdf = append(cdf, total)
			prev = cur
		}
		d := 0.0
		for i, x := range xs {
			k := sort.SearchFloat64s(grid, x)
			if k >= len(grid) {
				k = len(grid) - 1
			}
			f := cdf[k] / total
			d = math.Max(d, math.Max(math.Abs(f-float64(i)/n), math.Abs(f-float64(i+1)/n)))
		}
		// acceptance-rejection with proposal p and bound 1/Z needs on average sigma/Z tries
		t.Logf("Sigma %.1f: KS %.4f, mean tries %.2f (expected %.2f)", sigma, d, float64(tries)/n, sigma/total)
		if d > 0.0098 {
			t.Errorf("Sigma %.1f: resampled values differ from the modified distribution (KS %.4f)", sigma, d)
		}
		if mt := float64(tries) / n; math.Abs(mt-sigma/total) > 0.05*sigma/total {
			t.Errorf("Sigma %.1f: mean tries %.3f, expected %.3f", sigma, mt, sigma/total)
		}
	}
}

// 2-D, diagonal Gaussians: the mean and second moments of 40000 draws match those of the
// modified density integrated on a grid (tolerance 0.02, several standard errors).
func TestResamplerMatchesModifiedDistribution2D(t *testing.T) {
	pm, plv := []float64{0, 0}, []float64{0, 0}
	qm, qsd := []float64{0.5, -0.3}, []float64{0.8, 1.2}
	qlv := []float64{2 * math.Log(qsd[0]), 2 * math.Log(qsd[1])}
	density := func(x, y float64) float64 {
		p := normPDF(x, 0, 1) * normPDF(y, 0, 1)
		q := normPDF(x, qm[0], qsd[0]) * normPDF(y, qm[1], qsd[1])
		return math.Max(0, p-q)
	}
	const h = 0.02
	var z, mx, my, mxx, myy float64
	for x := -7.0; x <= 7; x += h {
		for y := -7.0; y <= 7; y += h {
			w := density(x, y) * h * h
			z += w
			mx += w * x
			my += w * y
			mxx += w * x * x
			myy += w * y * y
		}
	}
	want := []float64{mx / z, my / z, mxx / z, myy / z}
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 40000
	got := make([]float64, 4)
	for i := 0; i < n; i++ {
		r := ResampleModified(rng, pm, plv, qm, qlv, 0, 10000)
		got[0] += r.X[0] / n
		got[1] += r.X[1] / n
		got[2] += r.X[0] * r.X[0] / n
		got[3] += r.X[1] * r.X[1] / n
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 0.02 {
			t.Errorf("moment %d: sampled %.4f, integrated %.4f", i, got[i], want[i])
		}
	}
}

func TestResamplerBoundIsCounted(t *testing.T) {
	// q covers p entirely with a higher density: alpha_s is 0 almost everywhere
	rng := rand.New(rand.NewPCG(1, 1))
	r := ResampleModified(rng, []float64{0}, []float64{0}, []float64{0}, []float64{-0.5}, math.Log(0.01), 25)
	if !r.BoundHit || r.Tries != 25 || len(r.X) != 1 {
		t.Fatalf("bound not reported: %+v", r)
	}
}
