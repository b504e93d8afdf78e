package mar

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"
)

func int8Entry() map[string]any {
	return map[string]any{"transformer": "transformer.int8.onnx", "head": "head.int8.onnx", "head_loop": "head_loop.int8.onnx",
		"quantization": map[string]any{"scheme": "free-form"}}
}

// The precisions entry names known precisions and files in the folder, and a fused head
// exactly when the fp32 graphs have one, so a precision never falls back to fp32 graphs.
func TestPrecisionsEntry(t *testing.T) {
	m := targetManifestJSON(t)
	m["precisions"] = map[string]any{"int8": int8Entry()}
	data, _ := json.Marshal(m)
	if _, err := ParseManifest(data, "p/manifest.json"); err != nil {
		t.Fatalf("valid int8 entry rejected: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(e map[string]any) map[string]any // the precisions object
		want string
	}{
		{"unknown precision", func(e map[string]any) map[string]any { return map[string]any{"bf16": e} }, `precisions: "bf16" unsupported (allowed: int8`},
		{"fp32 listed", func(e map[string]any) map[string]any { return map[string]any{"fp32": e} }, `"fp32" unsupported`},
		{"path", func(e map[string]any) map[string]any {
			e["head"] = "../head.int8.onnx"
			return map[string]any{"int8": e}
		}, `head "../head.int8.onnx"`},
		{"no transformer", func(e map[string]any) map[string]any { delete(e, "transformer"); return map[string]any{"int8": e} }, `transformer ""`},
		{"no fused head", func(e map[string]any) map[string]any { delete(e, "head_loop"); return map[string]any{"int8": e} }, "head_loop must be given exactly when"},
		{"unknown field", func(e map[string]any) map[string]any { e["decoder"] = "d.onnx"; return map[string]any{"int8": e} }, `unknown field "decoder"`},
	} {
		m["precisions"] = c.edit(int8Entry())
		data, _ := json.Marshal(m)
		if _, err := ParseManifest(data, "p/manifest.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %s", c.name, err, c.want)
		}
	}
}

// LoadPackFSAt reads the graphs of the precision asked for, and says which pack lacks them.
func TestLoadPackAtPrecision(t *testing.T) {
	plain := targetManifestJSON(t)
	delete(plain, "precisions") // the committed pack has int8 graphs; this one starts without
	manifest, _ := json.Marshal(plain)
	fsys := fstest.MapFS{
		"p/manifest.json":           {Data: manifest},
		"p/transformer.onnx":        {Data: []byte("T")},
		"p/head.onnx":               {Data: []byte("H")},
		"p/head_loop.onnx":          {Data: []byte("F")},
		"p/exit_draft.onnx":         {Data: []byte("XD")},
		"p/exit_rest.onnx":          {Data: []byte("XR")},
		"p/transformer.int8.onnx":   {Data: []byte("T8")},
		"p/head.int8.onnx":          {Data: []byte("H8")},
		"p/head_loop.int8.onnx":     {Data: []byte("F8")},
		"p/distilled_head.onnx":     {Data: []byte("DH")}, // the committed manifest names the distilled head too
		"p/transformer_cached.onnx": {Data: []byte("TC")}, // and the cached transformer (read at fp32 only)
	}
	if _, err := LoadPackFSAt(fsys, "p", "embedded/p", Int8); err == nil ||
		!strings.Contains(err.Error(), "embedded/p: model pack fmnist-target has no int8 graphs") || !strings.Contains(err.Error(), "quantize_pack.py") {
		t.Fatalf("pack without int8 graphs: %v", err)
	}
	if _, err := LoadPackFSAt(fsys, "p", "embedded/p", "int4"); err == nil || !strings.Contains(err.Error(), `precision "int4" unknown (allowed: fp32, int8)`) {
		t.Fatalf("unknown precision: %v", err)
	}
	m := targetManifestJSON(t)
	m["precisions"] = map[string]any{"int8": int8Entry()}
	data, _ := json.Marshal(m)
	fsys["p/manifest.json"] = &fstest.MapFile{Data: data}
	// at fp32 the cached graph serves the transformer's passes, so transformer.onnx is not read
	for _, c := range []struct{ precision, t, h, f string }{{"", "", "H", "F"}, {FP32, "", "H", "F"}, {Int8, "T8", "H8", "F8"}} {
		p, err := LoadPackFSAt(fsys, "p", "embedded/p", c.precision)
		if err != nil {
			t.Fatal(err)
		}
		if string(p.Transformer) != c.t || string(p.Head) != c.h || string(p.HeadLoop) != c.f || string(p.ExitDraft) != "XD" {
			t.Errorf("precision %q read %s/%s/%s/%s", c.precision, p.Transformer, p.Head, p.HeadLoop, p.ExitDraft)
		}
	}
	delete(fsys, "p/head.int8.onnx")
	if _, err := LoadPackFSAt(fsys, "p", "embedded/p", Int8); err == nil || !strings.Contains(err.Error(), "cannot read head.int8.onnx") {
		t.Fatalf("missing head.int8.onnx: %v", err)
	}
}
