package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --precision fp16 on the CPU (the default device) stops every command that runs a pack before
// any work, saying what is wrong and what is allowed; with --device cuda the embedded pack,
// which has no fp16 graphs, is refused naming the tool that makes them (checked before the
// CUDA provider is started, so this runs without a GPU).
func TestPrecisionFP16Refused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gen")
	for _, args := range [][]string{
		{"generate", "--precision", "fp16", "--class", "0", "--n", "1", "--quiet", "--out", out},
		{"bench", "--precisions", "fp32,fp16", "--rounds", "1", "--gen-batches", ""},
	} {
		_, stderr, code := marspec(t, nil, args...)
		if code == 0 {
			t.Fatalf("%s: ran with fp16 on the CPU", strings.Join(args, " "))
		}
		for _, want := range []string{"fp16", "CUDA provider", "--device cuda", "fp32 or int8"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: message lacks %q:\n%s", args[0], want, stderr)
			}
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the refused run left its output folder")
	}
	_, stderr, code := marspec(t, nil, "generate", "--device", "cuda", "--precision", "fp16", "--class", "0", "--n", "1", "--quiet", "--out", out)
	if code == 0 || !strings.Contains(stderr, "has no fp16 graphs") || !strings.Contains(stderr, "scripts/packs/half_pack.py PACK") {
		t.Errorf("--device cuda --precision fp16 on a pack without fp16 graphs: exit %d\n%s", code, stderr)
	}
}
