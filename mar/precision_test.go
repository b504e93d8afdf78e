package mar

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"marspec/onnxrt"
)

func int8Entry() map[string]any {
	return map[string]any{"transformer": "transformer.int8.onnx", "head": "head.int8.onnx", "head_loop": "head_loop.int8.onnx",
		"transformer_cached": "transformer_cached.int8.onnx", "quantization": map[string]any{"scheme": "free-form"}}
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
	noClip := targetManifestJSON(t) // a pack that never clips may say its fp16 sampler does not either
	noClip["diffusion"].(map[string]any)["clip_x0"] = false
	entry := int8Entry()
	entry["head_loop_never_clips"] = true
	noClip["precisions"] = map[string]any{"fp16": entry}
	data, _ = json.Marshal(noClip)
	if _, err := ParseManifest(data, "p/manifest.json"); err != nil {
		t.Fatalf("fp16 entry whose sampler never clips, on a pack that never clips, rejected: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(e map[string]any) map[string]any // the precisions object
		want string
	}{
		{"unknown precision", func(e map[string]any) map[string]any { return map[string]any{"bf16": e} }, `precisions: "bf16" unsupported (allowed: int8, fp16`},
		{"fp32 listed", func(e map[string]any) map[string]any { return map[string]any{"fp32": e} }, `"fp32" unsupported`},
		{"path", func(e map[string]any) map[string]any {
			e["head"] = "../head.int8.onnx"
			return map[string]any{"int8": e}
		}, `head "../head.int8.onnx"`},
		{"no transformer", func(e map[string]any) map[string]any { delete(e, "transformer"); return map[string]any{"int8": e} }, `transformer ""`},
		{"no fused head", func(e map[string]any) map[string]any { delete(e, "head_loop"); return map[string]any{"int8": e} }, "head_loop must be given exactly when"},
		{"cached path", func(e map[string]any) map[string]any {
			e["transformer_cached"] = "/tmp/c.onnx"
			return map[string]any{"int8": e}
		}, `transformer_cached "/tmp/c.onnx"`},
		{"picked path", func(e map[string]any) map[string]any {
			e["transformer_picked"] = "p/t.onnx"
			return map[string]any{"int8": e}
		}, `transformer_picked "p/t.onnx" needs the pack's picked graph and must be a file name`},
		{"unknown field", func(e map[string]any) map[string]any { e["decoder"] = "d.onnx"; return map[string]any{"int8": e} }, `unknown field "decoder"`},
		{"sampler made for no clipping", func(e map[string]any) map[string]any { // the embedded target clips x0
			e["head_loop_never_clips"] = true
			return map[string]any{"fp16": e}
		}, "precisions fp16: head_loop was made for a pack that never clips x0, but diffusion.clip_x0 is true (/usr/bin/python3 scripts/packs/half_pack.py PACK again writes it)"},
		{"unrolled path", func(e map[string]any) map[string]any {
			e["head_loop_unrolled"] = []map[string]any{{"file": "a/u.onnx", "steps": 50}}
			return map[string]any{"int8": e}
		}, `precisions int8: head_loop_unrolled: file "a/u.onnx"`},
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
		"p/manifest.json":                {Data: manifest},
		"p/transformer.onnx":             {Data: []byte("T")},
		"p/head.onnx":                    {Data: []byte("H")},
		"p/head_loop.onnx":               {Data: []byte("F")},
		"p/exit_draft.onnx":              {Data: []byte("XD")},
		"p/exit_rest.onnx":               {Data: []byte("XR")},
		"p/transformer.int8.onnx":        {Data: []byte("T8")},
		"p/head.int8.onnx":               {Data: []byte("H8")},
		"p/head_loop.int8.onnx":          {Data: []byte("F8")},
		"p/distilled_head.onnx":          {Data: []byte("DH")}, // the committed manifest names the distilled head too
		"p/transformer_cached.onnx":      {Data: []byte("TC")}, // and the cached transformer
		"p/transformer_cached.int8.onnx": {Data: []byte("TC8")},
		"p/transformer_picked.onnx":      {Data: []byte("TP")}, // and the picked transformer
	}
	if _, err := LoadPackFSAt(fsys, "p", "embedded/p", Int8); err == nil ||
		!strings.Contains(err.Error(), "embedded/p: model pack fmnist-target has no int8 graphs") || !strings.Contains(err.Error(), "quantize_pack.py") {
		t.Fatalf("pack without int8 graphs: %v", err)
	}
	if _, err := LoadPackFSAt(fsys, "p", "embedded/p", "int4"); err == nil || !strings.Contains(err.Error(), `precision "int4" unknown (allowed: fp32, int8, fp16)`) {
		t.Fatalf("unknown precision: %v", err)
	}
	m := targetManifestJSON(t)
	m["precisions"] = map[string]any{"int8": int8Entry()}
	data, _ := json.Marshal(m)
	fsys["p/manifest.json"] = &fstest.MapFile{Data: data}
	for _, c := range []struct{ precision, t, h, f, c string }{{"", "T", "H", "F", "TC"}, {FP32, "T", "H", "F", "TC"}, {Int8, "T8", "H8", "F8", "TC8"}} {
		p, err := LoadPackFSAt(fsys, "p", "embedded/p", c.precision)
		if err != nil {
			t.Fatal(err)
		}
		if string(p.Transformer) != c.t || string(p.Head) != c.h || string(p.HeadLoop) != c.f || string(p.ExitDraft) != "XD" || string(p.Cached) != c.c {
			t.Errorf("precision %q read %s/%s/%s/%s/%s", c.precision, p.Transformer, p.Head, p.HeadLoop, p.ExitDraft, p.Cached)
		}
	}
	// an int8 entry made before the cached graph was quantised: no cached graph at int8
	old := int8Entry()
	delete(old, "transformer_cached")
	m["precisions"] = map[string]any{"int8": old}
	data, _ = json.Marshal(m)
	fsys["p/manifest.json"] = &fstest.MapFile{Data: data}
	if p, err := LoadPackFSAt(fsys, "p", "embedded/p", Int8); err != nil || p.Cached != nil || p.Manifest.HasCachedAt(Int8) || !p.Manifest.HasCachedAt(FP32) {
		t.Fatalf("int8 entry without a cached graph: %v, cached %q", err, p.Cached)
	}
	m["precisions"] = map[string]any{"int8": int8Entry()}
	data, _ = json.Marshal(m)
	fsys["p/manifest.json"] = &fstest.MapFile{Data: data}
	delete(fsys, "p/head.int8.onnx")
	if _, err := LoadPackFSAt(fsys, "p", "embedded/p", Int8); err == nil || !strings.Contains(err.Error(), "cannot read head.int8.onnx") {
		t.Fatalf("missing head.int8.onnx: %v", err)
	}
}

// An fp16 entry (scripts/packs/half_pack.py) is read like an int8 one, a pack without it names
// that tool, and opening fp16 graphs on the CPU is refused before any session starts.
func TestFP16Precision(t *testing.T) {
	m := targetManifestJSON(t)
	entry := int8Entry()
	for k, f := range map[string]string{"transformer": "transformer.fp16.onnx", "head": "head.fp16.onnx",
		"head_loop": "head_loop.fp16.onnx", "transformer_cached": "transformer_cached.fp16.onnx"} {
		entry[k] = f
	}
	m["precisions"] = map[string]any{"fp16": entry}
	data, _ := json.Marshal(m)
	fsys := fstest.MapFS{"p/manifest.json": {Data: data}}
	for _, f := range []string{"transformer", "head", "head_loop", "exit_draft", "exit_rest", "distilled_head", "transformer_cached"} {
		fsys["p/"+f+".onnx"] = &fstest.MapFile{Data: []byte(f)}
	}
	for _, f := range []string{"transformer", "head", "head_loop", "transformer_cached"} {
		fsys["p/"+f+".fp16.onnx"] = &fstest.MapFile{Data: []byte(f + "16")}
	}
	if _, err := LoadPackFSAt(fsys, "p", "embedded/p", Int8); err == nil || !strings.Contains(err.Error(), "quantize_pack.py") {
		t.Errorf("int8 from a pack with fp16 graphs only: %v", err)
	}
	p, err := LoadPackFSAt(fsys, "p", "embedded/p", FP16)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Transformer) != "transformer16" || string(p.HeadLoop) != "head_loop16" || string(p.Cached) != "transformer_cached16" {
		t.Errorf("fp16 read %s/%s/%s", p.Transformer, p.HeadLoop, p.Cached)
	}
	if _, err := p.Open(onnxrt.SessionOptions{Device: onnxrt.CPU}); !errors.Is(err, ErrFP16OnCPU) || !strings.Contains(err.Error(), "embedded/p") {
		t.Errorf("opening fp16 on the CPU: %v, want %v naming the pack", err, ErrFP16OnCPU)
	}
	delete(m, "precisions")
	data, _ = json.Marshal(m)
	fsys["p/manifest.json"] = &fstest.MapFile{Data: data}
	if _, err := LoadPackFSAt(fsys, "p", "embedded/p", FP16); err == nil || !strings.Contains(err.Error(), "has no fp16 graphs (/usr/bin/python3 scripts/packs/half_pack.py PACK adds them)") {
		t.Errorf("pack without fp16 graphs: %v", err)
	}
	for _, c := range []struct {
		precision, provider string
		ok                  bool
	}{{FP16, "cuda", true}, {FP16, "cpu", false}, {FP16, "", false}, {Int8, "cpu", true}, {FP32, "cuda", true}} {
		if err := CheckPrecisionProvider(c.precision, c.provider); (err == nil) != c.ok {
			t.Errorf("CheckPrecisionProvider(%s, %q) = %v", c.precision, c.provider, err)
		}
	}
}
