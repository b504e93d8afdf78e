package generation

import (
	"marspec/mar/analytic"
)

// TestModels returns a small analytic target and draft (closed-form models, milliseconds per
// image) under the pack names "target" and "draft", and their catalog: what the scheduler,
// server and store tests run instead of ONNX models.
func TestModels() (Fixed, Catalog) {
	target := analytic.Params{Name: "analytic-target", SeqLen: 6, TokenDim: 3, Base: []float64{0.3, -0.2, 0.5, 0, -0.4, 0.1},
		ClassShift: 0.02, Coupling: 0.6, Scale: 0.01, Steps: 10, Classes: 3}
	draft := target
	draft.Name, draft.Coupling, draft.Scale = "analytic-draft", 0.55, 0.013
	draft.Base = []float64{0.305, -0.196, 0.494, 0.004, -0.4, 0.106}
	models := Fixed{"target": analytic.New(target), "draft": analytic.New(draft)}
	names := []string{"T-shirt/top", "Trouser", "Pullover"} // a slash, as in the real packs
	for _, m := range models {
		m.Manifest.Classes = names
	}
	return models, Catalog{TargetPack: "target", DraftPack: "draft", Target: models["target"].Manifest,
		Draft: models["draft"].Manifest, MaxImages: 64, Provider: "cpu"}
}
