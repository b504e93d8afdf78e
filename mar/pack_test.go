package mar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestManifestValidation(t *testing.T) {
	good, err := os.ReadFile("../models/target/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseManifest(good, "m.json"); err != nil {
		t.Fatalf("embedded manifest rejected: %v", err)
	}
	cases := []struct{ from, to, want string }{
		{`"token_dim": 16`, `"token_dim": 12`, "token_dim 12 != channels*patch*patch = 16"},
		{`"height": 7`, `"height": 6`, "does not cover image"},
		{`"schedule": "cosine"`, `"schedule": "sigmoid"`, `diffusion schedule "sigmoid" unsupported`},
		{`"variance": "learned_range"`, `"variance": "fixed"`, `variance "fixed" unsupported`},
		{`"sampling_steps": 50`, `"sampling_steps": 5000`, "sampling_steps 5000 out of range"},
		{`"kind": "space_to_depth"`, `"kind": "vae"`, `tokenizer kind "vae" unsupported`},
		{`"format": "marspec-pack/1"`, `"format": "other/2"`, `format "other/2" unsupported`},
		{`"token_dim"`, `"token_dims"`, `unknown field "token_dims"`},
		{`{`, `[`, "invalid JSON"},
	}
	for _, c := range cases {
		bad := strings.Replace(string(good), c.from, c.to, 1)
		if bad == string(good) {
			t.Fatalf("fixture lacks %q", c.from)
		}
		_, err := ParseManifest([]byte(bad), "pack/manifest.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "pack/manifest.json: ") {
			t.Errorf("%s -> %s: error %v, want one naming the file and %q", c.from, c.to, err, c.want)
		}
	}
}

func TestGraphMismatchNamesFile(t *testing.T) {
	if err := InitRuntime("../" + DefaultORTLib); err != nil {
		t.Fatalf("%v (make test runs make setup first)", err)
	}
	dir := t.TempDir()
	for _, f := range []string{"manifest.json", "head.onnx"} {
		data, _ := os.ReadFile(filepath.Join("../models/target", f))
		os.WriteFile(filepath.Join(dir, f), data, 0o644)
	}
	// a head graph where the transformer should be
	head, _ := os.ReadFile("../models/target/head.onnx")
	os.WriteFile(filepath.Join(dir, "transformer.onnx"), head, 0o644)
	pack, err := LoadPackDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pack.Open(SessionOptions{})
	if err == nil || !strings.Contains(err.Error(), "transformer.onnx") || !strings.Contains(err.Error(), "input") {
		t.Fatalf("error %v should name transformer.onnx and the input mismatch", err)
	}
	// the draft's graphs do not fit the target's manifest (width 64 vs 128)
	draftHead, _ := os.ReadFile("../models/draft/head.onnx")
	tr, _ := os.ReadFile("../models/target/transformer.onnx")
	os.WriteFile(filepath.Join(dir, "transformer.onnx"), tr, 0o644)
	os.WriteFile(filepath.Join(dir, "head.onnx"), draftHead, 0o644)
	pack, _ = LoadPackDir(dir)
	if _, err = pack.Open(SessionOptions{}); err == nil || !strings.Contains(err.Error(), "head.onnx") || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("error %v should name head.onnx and the shape mismatch", err)
	}
	os.Remove(filepath.Join(dir, "head.onnx"))
	if _, err := LoadPackDir(dir); err == nil || !strings.Contains(err.Error(), "head.onnx") {
		t.Fatalf("missing head.onnx: %v", err)
	}
}

func TestMissingRuntimeLibrary(t *testing.T) {
	_, err := findORTLib("/no/such/lib.so")
	if err == nil || !strings.Contains(err.Error(), "/no/such/lib.so not found") {
		t.Fatalf("explicit path: %v", err)
	}
	t.Setenv("MARSPEC_ORT_LIB", "")
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(t.TempDir())
	if _, err := findORTLib(""); err == nil || !strings.Contains(err.Error(), "make setup") {
		t.Fatalf("default path: %v", err)
	}
}
