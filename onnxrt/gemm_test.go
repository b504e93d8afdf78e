package onnxrt

import (
	"math"
	"strings"
	"testing"
)

// The hand-written MatMul model must compute a times b: checked against a plain loop, under
// each tuning setting (a setting ONNX Runtime refuses fails here, not in a benchmark).
func TestMatMulModelComputesTheProduct(t *testing.T) {
	needRuntime(t)
	const m, k, n = 3, 5, 4
	b := make([]float32, k*n)
	for i := range b {
		b[i] = float32(i%7) - 3
	}
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32(i%5)*0.5 - 1
	}
	for _, tuning := range []string{"", "opt=off", "opt=basic,spin=off,arena=off", "opt=extended", "prepack=off"} {
		tu, err := ParseTuning(tuning)
		if err != nil {
			t.Fatal(err)
		}
		g, err := NewGraph(MatMulModel(k, n, b), "gemm", SessionOptions{IntraOpThreads: 1, Tuning: tu},
			[]IOSpec{{Name: "a", Shape: []int64{-1, k}}}, []IOSpec{{Name: "c", Shape: []int64{-1, n}}})
		if err != nil {
			t.Fatalf("tuning %q: %v", tuning, err)
		}
		c := make([]float32, m*n)
		if err := g.RunInto(m, c, a); err != nil {
			t.Fatal(err)
		}
		g.Close()
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				want := 0.0
				for l := 0; l < k; l++ {
					want += float64(a[i*k+l]) * float64(b[l*n+j])
				}
				if math.Abs(float64(c[i*n+j])-want) > 1e-5 {
					t.Fatalf("tuning %q: c[%d,%d] = %g, want %g", tuning, i, j, c[i*n+j], want)
				}
			}
		}
	}
	r, err := MeasureGEMM(SessionOptions{IntraOpThreads: 1}, 64, 64, 64, 3)
	if err != nil || r.GFLOPs <= 0 || r.MsPerCall <= 0 {
		t.Fatalf("MeasureGEMM: %+v, %v", r, err)
	}
}

func TestParseTuning(t *testing.T) {
	tu, err := ParseTuning(" opt=extended, spin=off ,arena=on")
	if err != nil || tu != (Tuning{GraphOpt: "extended", NoSpin: true}) || tu.String() != "opt=extended,spin=off" {
		t.Fatalf("got %+v (%s), %v", tu, tu, err)
	}
	if tu, err := ParseTuning("prepack=off,arena=off"); err != nil || tu != (Tuning{NoArena: true, NoPrepack: true}) || tu.String() != "arena=off,prepack=off" {
		t.Fatalf("prepack: %+v, %v", tu, err)
	}
	if tu, err := ParseTuning(""); err != nil || tu.String() != "default" {
		t.Fatalf("empty: %+v, %v", tu, err)
	}
	for in, want := range map[string]string{
		"opt=fast":  `opt="fast": allowed all, extended, basic, off`,
		"spin=no":   `spin="no": allowed on, off`,
		"threads=2": `key "threads" unknown (keys: opt, spin, arena, prepack)`,
		"opt":       `want key=value`,
	} {
		if _, err := ParseTuning(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to say %q", in, err, want)
		}
	}
}
