package fid

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

type scipyReference struct {
	A, B           [][]float64
	Mu1, Mu2       []float64
	Sigma1, Sigma2 [][]float64
	FID            float64 `json:"fid"`
	Probs          [][]float64
	ISMean         float64 `json:"is_mean"`
	ISStd          float64 `json:"is_std"`
}

func loadReference(t *testing.T) scipyReference {
	data, err := os.ReadFile("testdata/scipy_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var r scipyReference
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func accumulate(t *testing.T, rows [][]float64) *Accumulator {
	acc := NewAccumulator(len(rows[0]))
	for _, r := range rows {
		if err := acc.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

func relErr(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-12) }

// Go statistics, FID and IS equal NumPy/SciPy's (scripts/tests/make_fid_fixtures.py) to 1e-6.
func TestMatchesScipy(t *testing.T) {
	ref := loadReference(t)
	a, b := accumulate(t, ref.A), accumulate(t, ref.B)
	s1, _ := a.Covariance()
	s2, _ := b.Covariance()
	for i := range ref.Mu1 {
		if relErr(a.Mean[i], ref.Mu1[i]) > 1e-9 {
			t.Fatalf("mean %d: %g vs %g", i, a.Mean[i], ref.Mu1[i])
		}
		for j := range ref.Mu1 {
			if relErr(s1.At(i, j), ref.Sigma1[i][j]) > 1e-9 {
				t.Fatalf("sigma %d,%d: %g vs %g", i, j, s1.At(i, j), ref.Sigma1[i][j])
			}
		}
	}
	got, err := Frechet(a.Mean, s1, b.Mean, s2)
	if err != nil {
		t.Fatal(err)
	}
	if relErr(got, ref.FID) > 1e-6 {
		t.Fatalf("FID %.10f, scipy %.10f", got, ref.FID)
	}
	m, s, err := InceptionScore(ref.Probs, 10)
	if err != nil {
		t.Fatal(err)
	}
	if relErr(m, ref.ISMean) > 1e-6 || relErr(s, ref.ISStd) > 1e-6 {
		t.Fatalf("IS %.8f ± %.8f, numpy %.8f ± %.8f", m, s, ref.ISMean, ref.ISStd)
	}
}

func TestFrechetClosedForms(t *testing.T) {
	ref := loadReference(t)
	a := accumulate(t, ref.A)
	s, _ := a.Covariance()
	if d, _ := Frechet(a.Mean, s, a.Mean, s); d < 0 || d > 1e-9 {
		t.Fatalf("FID of a set with itself: %g (want 0 to 1e-9, never below 0)", d)
	}
	// commuting (diagonal) covariances: |dmu|^2 + sum (sqrt(a) - sqrt(b))^2
	s1 := mat.NewSymDense(3, []float64{4, 0, 0, 0, 1, 0, 0, 0, 0.25})
	s2 := mat.NewSymDense(3, []float64{1, 0, 0, 0, 9, 0, 0, 0, 0.25})
	want := 1.0 + 4 + 0 + (2-1)*(2-1) + (1-3)*(1-3) + 0
	if d, _ := Frechet([]float64{1, 0, 2}, s1, []float64{0, 2, 2}, s2); math.Abs(d-want) > 1e-9 {
		t.Fatalf("diagonal case %g, want %g", d, want)
	}
}

func TestShardedMergeEqualsSingleRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([][]float64, 1000)
	for i := range rows {
		rows[i] = []float64{rng.NormFloat64() + 3, rng.NormFloat64() * 2, rng.Float64()}
		rows[i][2] += rows[i][0] * 0.5
	}
	whole := accumulate(t, rows)
	dir := t.TempDir()
	var merged *Accumulator
	for k, part := range [][][]float64{rows[:137], rows[137:600], rows[600:]} {
		path := filepath.Join(dir, "shard"+string(rune('0'+k))+".npz")
		if err := WriteStats(path, accumulate(t, part)); err != nil {
			t.Fatal(err)
		}
		back, err := ReadPartial(path)
		if err != nil {
			t.Fatal(err)
		}
		if merged == nil {
			merged = back
		} else if err := merged.Merge(back); err != nil {
			t.Fatal(err)
		}
	}
	cw, _ := whole.Covariance()
	cm, _ := merged.Covariance()
	for i := 0; i < 3; i++ {
		if relErr(merged.Mean[i], whole.Mean[i]) > 1e-12 {
			t.Fatalf("merged mean %d differs", i)
		}
		for j := 0; j < 3; j++ {
			if relErr(cm.At(i, j), cw.At(i, j)) > 1e-10 {
				t.Fatalf("merged covariance %d,%d: %g vs %g", i, j, cm.At(i, j), cw.At(i, j))
			}
		}
	}
}

func TestReadsNumpyStats(t *testing.T) {
	ref := loadReference(t)
	st, err := ReadStats("testdata/stats_numpy.npz")
	if err != nil {
		t.Fatal(err)
	}
	for i := range ref.Mu1 {
		if st.Mu[i] != ref.Mu1[i] || relErr(st.Sigma.At(i, 0), ref.Sigma1[i][0]) > 1e-15 {
			t.Fatalf("npz from numpy read wrongly at %d", i)
		}
	}
}

func TestBadInput(t *testing.T) {
	acc := NewAccumulator(3)
	if err := acc.Add([]float64{1, math.NaN(), 2}); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("NaN feature: %v", err)
	}
	if err := acc.Add([]float64{1, 2}); err == nil || !strings.Contains(err.Error(), "dimension 3") {
		t.Fatalf("wrong dimension: %v", err)
	}
	s2 := mat.NewSymDense(2, nil)
	s3 := mat.NewSymDense(3, nil)
	if _, err := Frechet([]float64{0, 0}, s2, []float64{0, 0, 0}, s3); err == nil || !strings.Contains(err.Error(), "dimensions differ") {
		t.Fatalf("mismatched dimensions: %v", err)
	}
	if _, err := acc.Covariance(); err == nil {
		t.Fatal("covariance of no samples accepted")
	}
	if _, _, err := InceptionScore([][]float64{{1}}, 10); err == nil {
		t.Fatal("IS with fewer images than splits accepted")
	}
	if _, err := ReadStats(filepath.Join(t.TempDir(), "none.npz")); err == nil {
		t.Fatal("missing file accepted")
	}
}

// NumPy reads what we write (run when Debian's python3-numpy is present).
func TestNumpyReadsOurStats(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	ref := loadReference(t)
	path := filepath.Join(t.TempDir(), "stats.npz")
	if err := WriteStats(path, accumulate(t, ref.A)); err != nil {
		t.Fatal(err)
	}
	script := `import sys, json, numpy as np
d = np.load(sys.argv[1]); print(json.dumps({"mu": d["mu"].tolist(), "s": d["sigma"][1][2], "n": int(d["n"][0])}))`
	out, err := exec.Command("/usr/bin/python3", "-c", script, path).Output()
	if err != nil {
		t.Skipf("python3 with numpy not usable: %v", err)
	}
	var got struct {
		Mu []float64
		S  float64
		N  int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.N != len(ref.A) || relErr(got.Mu[0], ref.Mu1[0]) > 1e-12 || relErr(got.S, ref.Sigma1[1][2]) > 1e-9 {
		t.Fatalf("numpy read %+v", got)
	}
}

// Splits of class-sorted rows would each hold one class; the shuffled score sees the mix.
func TestShuffledInceptionScoreIgnoresOrder(t *testing.T) {
	var probs [][]float64
	for c := 0; c < 10; c++ {
		for i := 0; i < 50; i++ {
			p := make([]float64, 10)
			for j := range p {
				p[j] = 0.01
			}
			p[c] = 0.91
			probs = append(probs, p)
		}
	}
	sorted, _, _ := InceptionScore(probs, 10)
	shuffled, _, _ := ShuffledInceptionScore(probs, 10, 0)
	if sorted > 1.5 || shuffled < 4 {
		t.Fatalf("sorted splits %.2f, shuffled %.2f: want ~1 and well above 4", sorted, shuffled)
	}
}

// Rank-deficient covariances (fewer images than dimensions) take the pivoted factor's short
// path: for sigma1 = v v^T and sigma2 = w w^T, tr((sigma1 sigma2)^(1/2)) = |v . w|. A covariance
// with a negative eigenvalue, first or second, is refused by name.
func TestFrechetLowRankAndIndefinite(t *testing.T) {
	v, w := []float64{1, 2, 0, -1}, []float64{0.5, -1, 3, 2}
	outer := func(x []float64) *mat.SymDense {
		s := mat.NewSymDense(len(x), nil)
		s.SymOuterK(1, mat.NewDense(len(x), 1, x))
		return s
	}
	dot, nv, nw := 0.0, 0.0, 0.0
	for i := range v {
		dot, nv, nw = dot+v[i]*w[i], nv+v[i]*v[i], nw+w[i]*w[i]
	}
	mu1, mu2 := []float64{0, 1, 0, 0}, []float64{0, 0, 0, 2}
	want := 1.0 + 4 + nv + nw - 2*math.Abs(dot)
	if d, err := Frechet(mu1, outer(v), mu2, outer(w)); err != nil || math.Abs(d-want) > 1e-9 {
		t.Fatalf("rank-1 covariances: %g (%v), want %g", d, err, want)
	}
	indefinite := mat.NewSymDense(2, []float64{1, 2, 2, 1}) // eigenvalues 3 and -1
	eye := mat.NewSymDense(2, []float64{1, 0, 0, 1})
	zero := []float64{0, 0}
	for name, pair := range map[string][2]*mat.SymDense{"first": {indefinite, eye}, "second": {eye, indefinite}} {
		if _, err := Frechet(zero, pair[0], zero, pair[1]); err == nil || !strings.Contains(err.Error(), "not positive semi-definite") {
			t.Errorf("%s covariance indefinite: %v, want refused as not positive semi-definite", name, err)
		}
	}
}
