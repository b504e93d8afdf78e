package bench

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"marspec/generation"
	"marspec/mar"
	"marspec/onnxrt"
)

// bench --precisions at the smallest sizes on the embedded target (it carries int8 graphs):
// the fidelity lines show a real, small difference (the int8 graphs ran), and each timed part
// has one row with both precisions and a speedup.
func TestComparePrecisions(t *testing.T) {
	models, ok := generation.TestORTModels()
	if !ok {
		t.Skip("ONNX Runtime not set up (make setup)")
	}
	var named []Named
	for _, p := range []string{mar.FP32, mar.Int8} {
		m := &generation.ORTModels{ORTLib: models.ORTLib, Provider: models.Provider, Threads: models.Threads}
		model, err := m.Model("target", p)
		if err != nil {
			t.Fatal(err)
		}
		named = append(named, Named{Name: p, Model: model})
	}
	var out bytes.Buffer
	set := PrecisionSettings{Batches: []int{1}, HeadRows: []int{4}, Reps: 1, Rounds: 1, GenBatches: []int{2}, NumIter: 4, Steps: 5}
	if err := ComparePrecisions(&out, named, set); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	rel := regexp.MustCompile(`int8 vs fp32, (transformer z|head output): max \|difference\| \S+, RMS difference / RMS (\S+)`).FindAllStringSubmatch(text, -1)
	if len(rel) != 2 {
		t.Fatalf("want two fidelity lines:\n%s", text)
	}
	bound := onnxrt.Int8ToleranceRMS()
	for _, m := range rel {
		if v, err := strconv.ParseFloat(m[2], 64); err != nil || v < 1e-4 || v > bound {
			t.Errorf("%s: relative RMS difference %s, want 1e-4 to %g (int8 graphs run, and close)", m[1], m[2], bound)
		}
	}
	for _, part := range []string{"transformer pass (ms)", "head step (ms)", "generate num_iter 4, steps 5 (images/s)"} {
		if strings.Count(text, part) != 1 {
			t.Errorf("want one %q row:\n%s", part, text)
		}
	}
	if strings.Count(text, "x\n") != 3 {
		t.Errorf("want a speedup on each of the 3 rows:\n%s", text)
	}
	// one precision alone: its times, no fidelity lines and no speedups
	out.Reset()
	if err := ComparePrecisions(&out, named[:1], set); err != nil {
		t.Fatalf("one precision: %v", err)
	}
	alone := out.String()
	if strings.Contains(alone, " vs ") || strings.Contains(alone, "x\n") || strings.Count(alone, "transformer pass (ms)") != 1 {
		t.Errorf("one precision: want its times only:\n%s", alone)
	}
	if err := ComparePrecisions(&out, nil, set); err == nil {
		t.Error("no precision: want an error")
	}
}
