package mar

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/onnxrt"
)

func TestEarlyExitEntry(t *testing.T) {
	m := targetManifestJSON(t)
	ok := func() map[string]any {
		return map[string]any{"depth": 2, "blocks": 6, "exit_blocks": 1, "draft": "exit_draft.onnx",
			"rest": "exit_rest.onnx", "hidden_len": 53}
	}
	m["early_exit"] = ok()
	data, _ := json.Marshal(m)
	if _, err := ParseManifest(data, "p/manifest.json"); err != nil {
		t.Fatalf("valid early_exit entry rejected: %v", err)
	}
	for _, c := range []struct {
		key  string
		val  any
		want string
	}{
		{"depth", 0, "early_exit depth 0 out of range (allowed: 1 to blocks-1 = 5)"},
		{"depth", 6, "early_exit depth 6 out of range"},
		{"exit_blocks", -1, "exit_blocks -1 must not be negative"},
		{"draft", "../exit_draft.onnx", `early_exit draft "../exit_draft.onnx"`},
		{"rest", "exit_rest.bin", `rest "exit_rest.bin"`},
		{"hidden_len", 49, "early_exit hidden_len 49 != tokens + buffer_size = 53"},
	} {
		e := ok()
		e[c.key] = c.val
		m["early_exit"] = e
		data, _ := json.Marshal(m)
		if _, err := ParseManifest(data, "p/manifest.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%v: error %v, want one containing %s", c.key, c.val, err, c.want)
		}
	}
}

// The committed target's split graphs: finishing exit_draft's hidden states with exit_rest
// gives transformer.onnx's z for the same contexts (rows knowing different tokens, class and
// "no class"), and the exit's own z is near the target's but not equal to it (it was trained
// to approximate it).
func TestEarlyExitGraphsMatchTransformer(t *testing.T) {
	if _, err := os.Stat(filepath.Join(targetPack, "transformer.onnx")); err != nil {
		t.Skipf("%s/transformer.onnx is absent: export a target pack to run this test", targetPack)
	}
	needRuntime(t)
	p, err := LoadPackDir(targetPack)
	if err != nil {
		t.Fatal(err)
	}
	if p.Manifest.EarlyExit == nil {
		t.Fatalf("the committed target pack has no early_exit entry (scripts/train/early_exit.py adds it)")
	}
	model, err := p.Open(onnxrt.SessionOptions{IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m := p.Manifest
	L, D, W := m.SeqLen(), m.TokenDim, m.Width
	rng := rand.New(rand.NewSource(3))
	const rows = 4
	ctx := NewContextBatch(rows, L, D)
	for r := 0; r < rows; r++ {
		ctx.ClassIDs[r] = int64(r * 3 % len(m.Classes))
		for _, pos := range rng.Perm(L)[:r*15] {
			x := make([]float64, D)
			for i := range x {
				x[i] = 2*rng.Float64() - 1
			}
			ctx.Set(r, pos, x)
		}
	}
	want, wantU := make([]float32, rows*L*W), make([]float32, rows*L*W)
	if err := ctx.Condition(model.Transformer, want, wantU); err != nil {
		t.Fatal(err)
	}
	pass, err := RunExitDraft(model.Exit, ctx, W, true)
	if err != nil {
		t.Fatal(err)
	}
	checkFinite(t, "z_exit", pass.ZExit)
	checkFinite(t, "exit_logvar", pass.LogVar)
	var hidden, masks [][]float32
	for r := 0; r < rows; r++ {
		hidden = append(hidden, pass.HiddenRow(r))
		masks = append(masks, ctx.Mask[r*L:(r+1)*L])
	}
	z, zu, err := FinishExit(model.Exit, hidden, masks, L, W, true)
	if err != nil {
		t.Fatal(err)
	}
	maxDiff, exitErr, norm := 0.0, 0.0, 0.0
	for i := range want {
		maxDiff = max(maxDiff, abs32(z[i]-want[i]), abs32(zu[i]-wantU[i]))
		d := float64(pass.ZExit[i] - want[i])
		exitErr += d * d
		norm += float64(want[i]) * float64(want[i])
	}
	t.Logf("rest vs transformer: max |diff| %.2g; exit z relative squared error %.3f", maxDiff, exitErr/norm)
	if maxDiff > 1e-4 {
		t.Errorf("exit_rest(exit_draft hidden) differs from transformer.onnx by %g (allowed 1e-4)", maxDiff)
	}
	if exitErr == 0 || exitErr/norm > 0.5 {
		t.Errorf("exit z relative squared error %.3f: want an approximation, neither exact nor far", exitErr/norm)
	}
}

func abs32(x float32) float64 {
	if x < 0 {
		return float64(-x)
	}
	return float64(x)
}
