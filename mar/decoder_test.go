package mar

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vaeManifest is a small vae_decoder manifest (4x4 grid of 16-dim latents, 16x16 RGB image):
// token_dim is the latent width, not channels*patch*patch as for pixel tokens.
func vaeManifest() map[string]any {
	return map[string]any{
		"format":    "marspec-pack/1",
		"name":      "tiny-vae",
		"image":     map[string]any{"height": 16, "width": 16, "channels": 3},
		"tokenizer": map[string]any{"kind": "vae_decoder", "patch": 4, "graph": "decoder.onnx", "latent_scale": 0.2325},
		"grid":      map[string]any{"height": 4, "width": 4},
		"token_dim": 16, "width": 32, "buffer_size": 4,
		"classes": []string{"a", "b"},
		"diffusion": map[string]any{"schedule": "cosine", "training_steps": 1000, "sampling_steps": 10,
			"variance": "learned_range", "clip_x0": false},
	}
}

func parseMap(t *testing.T, m map[string]any) (*Manifest, error) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return ParseManifest(data, "test/manifest.json")
}

func TestVAEDecoderManifest(t *testing.T) {
	m, err := parseMap(t, vaeManifest())
	if err != nil {
		t.Fatalf("valid vae_decoder manifest rejected: %v", err)
	}
	if m.Tokenizer.Graph != "decoder.onnx" || m.Tokenizer.LatentScale != 0.2325 {
		t.Fatalf("tokenizer fields not decoded: %+v", m.Tokenizer)
	}
	tok := func(m map[string]any) map[string]any { return m["tokenizer"].(map[string]any) }
	cases := []struct {
		name   string
		mutate func(m map[string]any)
		want   string
	}{
		{"no graph", func(m map[string]any) { delete(tok(m), "graph") }, `tokenizer graph "": want a file name`},
		{"graph in a folder", func(m map[string]any) { tok(m)["graph"] = "../decoder.onnx" }, `tokenizer graph "../decoder.onnx"`},
		{"graph not onnx", func(m map[string]any) { tok(m)["graph"] = "decoder.bin" }, `tokenizer graph "decoder.bin"`},
		{"grid does not cover image", func(m map[string]any) { tok(m)["patch"] = 8 }, "grid 4x4 with patch 8 does not cover image 16x16"},
		{"unknown kind", func(m map[string]any) { tok(m)["kind"] = "vqgan" }, `tokenizer kind "vqgan" unsupported (allowed: space_to_depth, vae_decoder)`},
	}
	for _, c := range cases {
		m := vaeManifest()
		c.mutate(m)
		_, err := parseMap(t, m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestVAEDecoderPackNeedsGraph(t *testing.T) {
	dir := t.TempDir()
	data, _ := json.Marshal(vaeManifest())
	for name, body := range map[string][]byte{"manifest.json": data, "transformer.onnx": {1}, "head.onnx": {1}} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadPackDir(dir)
	if err == nil || !strings.Contains(err.Error(), "cannot read decoder.onnx") {
		t.Fatalf("pack without its decoder graph: got %v, want an error naming decoder.onnx", err)
	}
}

func TestDecodeImagesChecksLength(t *testing.T) {
	d := &ONNXDecoder{source: "x/decoder.onnx", seqLen: 4, dim: 2, channels: 3, height: 2, width: 2}
	if _, err := d.DecodeImages(make([]float32, 7), 1); err == nil || !strings.Contains(err.Error(), "got 7 token values for 1 images, want 8") {
		t.Fatalf("got %v", err)
	}
}
