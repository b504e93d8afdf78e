package mar

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

const targetPack = "../models/target"

// targetManifestJSON is the committed target manifest decoded into a map, so cases can break
// one field each.
func targetManifestJSON(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(targetPack, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeManifest(t *testing.T, m any) string {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestManifestValidation(t *testing.T) {
	if _, err := LoadManifest(writeManifest(t, targetManifestJSON(t))); err != nil {
		t.Fatalf("committed target manifest rejected: %v", err)
	}
	sub := func(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }
	cases := []struct {
		name   string
		mutate func(m map[string]any)
		want   string
	}{
		{"no name", func(m map[string]any) { delete(m, "name") }, "name is missing"},
		{"no image", func(m map[string]any) { delete(m, "image") }, "image height, width and channels are missing"},
		{"no width", func(m map[string]any) { delete(m, "width") }, "width is missing"},
		{"no classes", func(m map[string]any) { delete(m, "classes") }, "classes is missing or empty"},
		{"empty classes", func(m map[string]any) { m["classes"] = []string{} }, "classes is missing or empty"},
		{"token_dim", func(m map[string]any) { m["token_dim"] = 12 }, "token_dim 12 != channels*patch*patch = 16"},
		{"grid", func(m map[string]any) { sub(m, "grid")["height"] = 6 }, "grid 6x7 with patch 4 does not cover image 28x28"},
		{"schedule", func(m map[string]any) { sub(m, "diffusion")["schedule"] = "sigmoid" }, `diffusion schedule "sigmoid" unsupported (allowed: cosine, linear)`},
		{"variance", func(m map[string]any) { sub(m, "diffusion")["variance"] = "fixed" }, `variance "fixed" unsupported`},
		{"sampling steps", func(m map[string]any) { sub(m, "diffusion")["sampling_steps"] = 5000 }, "sampling_steps 5000 out of range"},
		{"tokenizer", func(m map[string]any) { sub(m, "tokenizer")["kind"] = "vae" }, `tokenizer kind "vae" unsupported`},
		{"format", func(m map[string]any) { m["format"] = "other/2" }, `format "other/2" unsupported`},
		{"unknown field", func(m map[string]any) { m["token_dims"] = 16 }, `unknown field "token_dims"`},
		{"buffer_size", func(m map[string]any) { m["buffer_size"] = -1 }, "buffer_size must not be negative"},
		{"picked file", func(m map[string]any) { sub(m, "picked")["file"] = "../t.onnx" }, `picked file "../t.onnx": want a file name in the pack folder ending in .onnx`},
	}
	for _, c := range cases {
		m := targetManifestJSON(t)
		c.mutate(m)
		dir := writeManifest(t, m)
		_, err := LoadManifest(dir)
		file := filepath.Join(dir, "manifest.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), file+": ") {
			t.Errorf("%s: error %v, want one naming %s and %q", c.name, err, file, c.want)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("[1,"), 0o644)
	if _, err := LoadManifest(dir); err == nil || !strings.Contains(err.Error(), "invalid JSON") {
		t.Errorf("broken JSON: %v", err)
	}
	if _, err := LoadManifest(t.TempDir()); err == nil || !strings.Contains(err.Error(), "cannot read manifest.json") {
		t.Errorf("missing manifest: %v", err)
	}
}

func TestClassIndex(t *testing.T) {
	m, err := LoadManifest(targetPack)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]int{"7": 7, "0": 0, "sneaker": 7, "ANKLE BOOT": 9, " Bag ": 8, "t-shirt/top": 0} {
		if got, err := m.ClassIndex(in); err != nil || got != want {
			t.Errorf("ClassIndex(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"10", "-1", "boot", ""} {
		_, err := m.ClassIndex(in)
		if err == nil || !strings.Contains(err.Error(), "allowed: 0 to 9, or a name: T-shirt/top, Trouser") {
			t.Errorf("ClassIndex(%q): error %v should list the allowed values", in, err)
		}
	}
	if m.SeqLen() != 49 {
		t.Errorf("SeqLen = %d, want 49", m.SeqLen())
	}
}

func TestLoadPackFS(t *testing.T) {
	manifest, _ := os.ReadFile(filepath.Join(targetPack, "manifest.json"))
	fsys := fstest.MapFS{
		"packs/p/manifest.json":                {Data: manifest},
		"packs/p/transformer.onnx":             {Data: []byte("T")},
		"packs/p/head.onnx":                    {Data: []byte("H")},
		"packs/p/head_loop.onnx":               {Data: []byte("F")},
		"packs/p/exit_draft.onnx":              {Data: []byte("XD")},
		"packs/p/exit_rest.onnx":               {Data: []byte("XR")},
		"packs/p/distilled_head.onnx":          {Data: []byte("DH")},
		"packs/p/transformer_cached.onnx":      {Data: []byte("TC")},
		"packs/p/transformer.int8.onnx":        {Data: []byte("TQ")},
		"packs/p/head.int8.onnx":               {Data: []byte("HQ")},
		"packs/p/head_loop.int8.onnx":          {Data: []byte("FQ")},
		"packs/p/transformer_cached.int8.onnx": {Data: []byte("TCQ")},
		"packs/p/transformer_picked.onnx":      {Data: []byte("TP")},
		"packs/p/transformer_picked.int8.onnx": {Data: []byte("TPQ")},
	}
	p, err := LoadPackFS(fsys, "packs/p", "embedded/p")
	if err != nil {
		t.Fatal(err)
	}
	// a small pack keeps both transformer graphs (FullPassesFromCacheBytes)
	if string(p.Transformer) != "T" || string(p.Head) != "H" || string(p.HeadLoop) != "F" || p.Manifest.Name != "fmnist-target" ||
		string(p.ExitDraft) != "XD" || string(p.ExitRest) != "XR" || string(p.Distilled) != "DH" || string(p.Cached) != "TC" ||
		string(p.Picked) != "TP" {
		t.Fatalf("pack read wrongly: %+v", p)
	}
	if p, err := LoadPackFSAt(fsys, "packs/p", "embedded/p", Int8); err != nil {
		t.Fatal(err)
	} else if string(p.Transformer) != "TQ" || string(p.Cached) != "TCQ" || string(p.Picked) != "TPQ" {
		t.Fatalf("int8 pack read wrongly: transformer %q, cached %q, picked %q", p.Transformer, p.Cached, p.Picked)
	}
	// a manifest that names the picked graph needs the file
	delete(fsys, "packs/p/transformer_picked.onnx")
	if _, err := LoadPackFS(fsys, "packs/p", "embedded/p"); err == nil || !strings.Contains(err.Error(), "embedded/p: cannot read transformer_picked.onnx") {
		t.Fatalf("missing transformer_picked.onnx: %v", err)
	}
	// past the threshold the cached graph serves every transformer pass: transformer.onnx is not
	// read, nor the picked graph beside it
	lowerFullPassesThreshold(t)
	if p, err := LoadPackFS(fsys, "packs/p", "embedded/p"); err != nil || p.Transformer != nil || string(p.Cached) != "TC" || !p.ServesFromCache() ||
		p.Picked != nil {
		t.Fatalf("a pack served from its cached graph: %v, transformer %q, cached %q, picked %q", err, p.Transformer, p.Cached, p.Picked)
	}
	fsys["packs/p/transformer_picked.onnx"] = &fstest.MapFile{Data: []byte("TP")}
	// so is the cached transformer
	delete(fsys, "packs/p/transformer_cached.onnx")
	if _, err := LoadPackFS(fsys, "packs/p", "embedded/p"); err == nil || !strings.Contains(err.Error(), "embedded/p: cannot read transformer_cached.onnx") {
		t.Fatalf("missing transformer_cached.onnx: %v", err)
	}
	fsys["packs/p/transformer_cached.onnx"] = &fstest.MapFile{Data: []byte("TC")}
	// the early-exit graphs are optional, but a manifest that names them needs the files
	delete(fsys, "packs/p/exit_rest.onnx")
	if _, err := LoadPackFS(fsys, "packs/p", "embedded/p"); err == nil || !strings.Contains(err.Error(), "embedded/p: cannot read exit_rest.onnx") {
		t.Fatalf("missing exit_rest.onnx: %v", err)
	}
	fsys["packs/p/exit_rest.onnx"] = &fstest.MapFile{Data: []byte("XR")}
	// so is the distilled head
	delete(fsys, "packs/p/distilled_head.onnx")
	if _, err := LoadPackFS(fsys, "packs/p", "embedded/p"); err == nil || !strings.Contains(err.Error(), "embedded/p: cannot read distilled_head.onnx") {
		t.Fatalf("missing distilled_head.onnx: %v", err)
	}
	fsys["packs/p/distilled_head.onnx"] = &fstest.MapFile{Data: []byte("DH")}
	// the fused graph is optional, but a manifest that names it needs the file (Open says so)
	delete(fsys, "packs/p/head_loop.onnx")
	if p, err = LoadPackFS(fsys, "packs/p", "embedded/p"); err != nil {
		t.Fatal(err)
	}
	if p.headLoopErr == nil || !strings.Contains(p.headLoopErr.Error(), "embedded/p: cannot read head_loop.onnx") {
		t.Fatalf("missing head_loop.onnx: %v", p.headLoopErr)
	}
	fsys["packs/p/manifest.json"] = &fstest.MapFile{Data: withoutHeadLoop(t, manifest)}
	if p, err = LoadPackFS(fsys, "packs/p", "embedded/p"); err != nil || p.HeadLoop != nil {
		t.Fatalf("pack without head_loop: %v, %d bytes of fused graph", err, len(p.HeadLoop))
	}
	delete(fsys, "packs/p/head.onnx")
	if _, err := LoadPackFS(fsys, "packs/p", "embedded/p"); err == nil || !strings.Contains(err.Error(), "embedded/p: cannot read head.onnx") {
		t.Fatalf("missing head.onnx: %v", err)
	}
	if _, err := LoadPackDir(filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "no such folder") {
		t.Fatalf("missing folder: %v", err)
	}
}

// withoutHeadLoop drops the optional fused-graph entry from a manifest, with the fused graphs
// of its other precisions.
func withoutHeadLoop(t *testing.T, manifest []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["head_loop"]; !ok {
		t.Fatal("the committed manifest has no head_loop entry")
	}
	delete(m, "head_loop")
	if ps, ok := m["precisions"].(map[string]any); ok { // their fused graphs go with it
		for _, p := range ps {
			delete(p.(map[string]any), "head_loop")
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestHeadLoopEntry(t *testing.T) {
	m := targetManifestJSON(t)
	for _, c := range []struct {
		entry map[string]any
		want  string
	}{
		{map[string]any{"file": "head_loop.onnx", "format": "marspec-head-loop/9"}, `head_loop format "marspec-head-loop/9" unsupported`},
		{map[string]any{"file": "../x/head_loop.onnx", "format": HeadLoopFormat}, `head_loop file "../x/head_loop.onnx"`},
		{map[string]any{"file": "", "format": HeadLoopFormat}, `head_loop file ""`},
		{map[string]any{"file": "head_loop.bin", "format": HeadLoopFormat}, `head_loop file "head_loop.bin"`},
		{unrolledEntry(map[string]any{"file": "../u.onnx", "steps": 50, "guided": true}), `head_loop unrolled: file "../u.onnx" must be a file name`},
		{unrolledEntry(map[string]any{"file": "u.onnx", "steps": 0, "guided": true}), `u.onnx has steps 0 (allowed: 1 to training_steps 1000)`},
		{unrolledEntry(map[string]any{"file": "u.onnx", "steps": 1001}), `u.onnx has steps 1001`},
		{unrolledEntry(map[string]any{"file": "u.onnx", "steps": 50}, map[string]any{"file": "v.onnx", "steps": 50}), `two graphs for 50 steps guided=false`},
		{unrolledEntry(map[string]any{"file": "u.onnx", "step": 50}), `unknown field "step"`},
	} {
		m["head_loop"] = c.entry
		data, _ := json.Marshal(m)
		if _, err := ParseManifest(data, "p/manifest.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %s", c.entry, err, c.want)
		}
	}
}

// unrolledEntry is a head_loop entry listing the unrolled graphs given.
func unrolledEntry(graphs ...map[string]any) map[string]any {
	return map[string]any{"file": "head_loop.onnx", "format": HeadLoopFormat, "unrolled": graphs}
}

// A pack reads the unrolled graphs of its precision, and one it names but lacks is reported
// as the fused head's error, when the head opens.
func TestLoadPackReadsUnrolled(t *testing.T) {
	m := targetManifestJSON(t)
	m["head_loop"] = unrolledEntry(map[string]any{"file": "head_loop.guided50.onnx", "steps": 50, "guided": true})
	e := int8Entry()
	e["head_loop_unrolled"] = []map[string]any{{"file": "head_loop.int8.unguided50.onnx", "steps": 50}}
	m["precisions"] = map[string]any{"int8": e}
	manifest, _ := json.Marshal(m)
	fsys := fstest.MapFS{"p/manifest.json": {Data: manifest}}
	for _, f := range []string{"transformer", "head", "head_loop", "transformer_cached", "transformer.int8", "head.int8",
		"head_loop.int8", "transformer_cached.int8", "transformer_picked", "head_loop.guided50", "head_loop.int8.unguided50", "exit_draft", "exit_rest", "distilled_head"} {
		fsys["p/"+f+".onnx"] = &fstest.MapFile{Data: []byte(f)}
	}
	p, err := LoadPackFS(fsys, "p", "embedded/p")
	if err != nil || p.headLoopErr != nil {
		t.Fatal(err, p.headLoopErr)
	}
	if len(p.unrolled) != 1 || p.unrolled[0].File != "head_loop.guided50.onnx" || string(p.unrolled[0].data) != "head_loop.guided50" || p.unrolled[0].halves() != 2 {
		t.Fatalf("fp32 unrolled graphs read: %+v", p.unrolled)
	}
	if p, err = LoadPackFSAt(fsys, "p", "embedded/p", Int8); err != nil || len(p.unrolled) != 1 || string(p.unrolled[0].data) != "head_loop.int8.unguided50" || p.unrolled[0].halves() != 1 {
		t.Fatalf("int8 unrolled graphs read: %v %+v", err, p.unrolled)
	}
	delete(fsys, "p/head_loop.guided50.onnx")
	if p, err = LoadPackFS(fsys, "p", "embedded/p"); err != nil || p.headLoopErr == nil || !strings.Contains(p.headLoopErr.Error(), "cannot read head_loop.guided50.onnx") {
		t.Fatalf("missing unrolled graph: %v, head loop error %v", err, p.headLoopErr)
	}
}

// A pack on disk leaves its large graphs to ONNX Runtime to read by path, so the process does
// not hold their bytes beside the sessions' weights: the head, and of the transformer's graphs
// the cached one where it serves the passes (the target), transformer.onnx otherwise (the
// draft, and at int8 its variant).
func TestLoadPackDirOpensTransformerByPath(t *testing.T) {
	threshold := FullPassesFromCacheBytes
	for _, c := range []struct {
		dir, precision, transformer, cached, head string
		servesFromCache                           bool
	}{
		{targetPack, FP32, "transformer.onnx", "transformer_cached.onnx", "head.onnx", false}, // 5 MB: both graphs
		{targetPack, Int8, "transformer.int8.onnx", "transformer_cached.int8.onnx", "head.int8.onnx", false},
		{targetPack, FP32, "", "transformer_cached.onnx", "head.onnx", true}, // the one-graph path, as a MAR-B pack takes it
		{targetPack, Int8, "", "transformer_cached.int8.onnx", "head.int8.onnx", true},
		{"../models/draft", FP32, "transformer.onnx", "", "head.onnx", true},
	} {
		FullPassesFromCacheBytes = threshold
		if c.servesFromCache {
			FullPassesFromCacheBytes = 0
		}
		p, err := LoadPackDirAt(c.dir, c.precision)
		FullPassesFromCacheBytes = threshold
		if p != nil && p.ServesFromCache() != (c.servesFromCache && c.cached != "") {
			t.Errorf("%s at %s: serves from its cached graph %v", c.dir, c.precision, p.ServesFromCache())
		}
		if err != nil {
			t.Fatal(err)
		}
		name := func(file string) string {
			if file == "" {
				return ""
			}
			return filepath.Base(file)
		}
		if p.Head != nil || name(p.HeadFile) != c.head {
			t.Errorf("%s at %s: %d bytes of head read, file %q; want none read, file %q", c.dir, c.precision, len(p.Head), p.HeadFile, c.head)
		}
		if p.Transformer != nil || p.Cached != nil || name(p.TransformerFile) != c.transformer || name(p.CachedFile) != c.cached {
			t.Errorf("%s at %s: %d and %d bytes read, files %q and %q; want none read, files %q and %q", c.dir, c.precision,
				len(p.Transformer), len(p.Cached), p.TransformerFile, p.CachedFile, c.transformer, c.cached)
		}
	}
	dir := t.TempDir()
	for _, f := range []string{"manifest.json", "transformer.onnx"} {
		data, _ := os.ReadFile(filepath.Join("../models/draft", f))
		os.WriteFile(filepath.Join(dir, f), data, 0o644)
	}
	if _, err := LoadPackDir(dir); err == nil || !strings.Contains(err.Error(), "cannot read head.onnx") {
		t.Fatalf("missing head.onnx: %v", err)
	}
	os.Remove(filepath.Join(dir, "transformer.onnx"))
	if _, err := LoadPackDir(dir); err == nil || !strings.Contains(err.Error(), "cannot read transformer.onnx") {
		t.Fatalf("missing transformer.onnx: %v", err)
	}
}

// lowerFullPassesThreshold makes every pack with a cached graph serve full passes from it (the
// path a MAR-B pack takes) until the test ends.
func lowerFullPassesThreshold(t *testing.T) {
	t.Helper()
	was := FullPassesFromCacheBytes
	FullPassesFromCacheBytes = 0
	t.Cleanup(func() { FullPassesFromCacheBytes = was })
}
