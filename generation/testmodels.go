package generation

import (
	"os"
	"path/filepath"

	"marspec/mar"
	"marspec/mar/analytic"
)

// TestModels returns a small analytic target and draft (closed-form models, milliseconds per
// image) under the pack names "target" and "draft", and their catalog: what the scheduler,
// server and store tests run instead of ONNX models.
func TestModels() (Fixed, Catalog) {
	target := testTargetParams()
	draft := target
	draft.Name, draft.Coupling, draft.Scale = "analytic-draft", 0.55, 0.013
	draft.Base = []float64{0.305, -0.196, 0.494, 0.004, -0.4, 0.106}
	models := Fixed{"target": analytic.New(target), "draft": analytic.New(draft)}
	names := []string{"T-shirt/top", "Trouser", "Pullover"} // a slash, as in the real packs
	for _, m := range models {
		m.Manifest.Classes = names
	}
	// the target carries the embedded target's presets and defaults (its num_iter fit 6 tokens)
	models["target"].Manifest.Settings = EmbeddedSettings()
	return models, Catalog{TargetPack: "target", DraftPack: "draft", Target: models["target"].Manifest,
		Draft: models["draft"].Manifest, MaxImages: 64, Provider: "cpu"}
}

func testTargetParams() analytic.Params {
	return analytic.Params{Name: "analytic-target", SeqLen: 6, TokenDim: 3, Base: []float64{0.3, -0.2, 0.5, 0, -0.4, 0.1},
		ClassShift: 0.02, Coupling: 0.6, Scale: 0.01, Steps: 10, Classes: 3}
}

// TestModelsWithExit is TestModels whose target also has an analytic early exit (first block
// of two, with an early_exit manifest entry): what the --draft exit tests run.
func TestModelsWithExit() (Fixed, Catalog) {
	models, cat := TestModels()
	exit := analytic.ExitParams{Coupling: 0.59, Bias: []float64{0, 0.001, 0, 0.03, -0.001, 0}, Floor: 1e-6}
	t := analytic.WithExit(models["target"], testTargetParams(), exit)
	t.Manifest.EarlyExit = &mar.EarlyExitSpec{Depth: 1, Blocks: 2, HiddenLen: 2}
	return models, cat
}

// TestORTModels opens packs with the ONNX Runtime library `make setup` put in the module's
// third_party folder (found from the working directory upwards, as a test runs in its
// package's folder), one thread; ok is false when it is not there.
func TestORTModels() (models *ORTModels, ok bool) {
	dir, err := os.Getwd()
	for err == nil {
		if _, e := os.Stat(filepath.Join(dir, "go.mod")); e == nil {
			lib := filepath.Join(dir, "third_party", "onnxruntime", "libonnxruntime.so")
			if _, e := os.Stat(lib); e != nil {
				return nil, false
			}
			return &ORTModels{ORTLib: lib, Provider: "cpu", Threads: 1}, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return nil, false
}

// TestModelsWithDistilled is TestModels whose target also has an exact analytic distilled head
// (steps 1, 2, 4; guidance up to 4) with its distilled_head manifest entry: what the
// --sampler distilled tests run.
func TestModelsWithDistilled() (Fixed, Catalog) {
	models, cat := TestModels()
	analytic.WithDistilled(models["target"], 4)
	return models, cat
}
