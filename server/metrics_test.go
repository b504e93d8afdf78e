package server

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"marspec/generation"
	"marspec/mar"
)

// The opening memo's counters appear per open pack whose transformer is memoised (as every
// pack Pack.Open makes is), and only for those: the analytic draft here is not wrapped. The same
// opening asked for twice is computed once and served once.
func TestOpeningMemoMetrics(t *testing.T) {
	models, _ := generation.TestModels()
	memo := mar.NewOpeningMemo(models["target"].Transformer, 1<<20)
	models["target"].Transformer = memo
	L, D := memo.SeqLen(), memo.TokenDim()
	mask := make([]float32, L)
	for i := range mask {
		mask[i] = 1 // no token known: an opening
	}
	for range 2 {
		z := make([]float32, L*memo.Width())
		if err := memo.Forward(make([]float32, L*D), mask, []int64{1}, []float32{0}, 1, z); err != nil {
			t.Fatal(err)
		}
	}
	m := newMetrics()
	m.openingMemo(models)
	rec := httptest.NewRecorder()
	m.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{`marspec_opening_memo_hits_total{pack="target",precision="fp32"} 1`, `marspec_opening_memo_computed_total{pack="target",precision="fp32"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `pack="draft"`) {
		t.Errorf("the draft has no memo, yet has memo metrics:\n%s", text)
	}
}
