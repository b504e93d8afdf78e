package generation

import (
	"os"
	"path"

	"marspec/fid"
	"marspec/models"
	"marspec/onnxrt"
)

// OpenEvaluator resolves an evaluator name as packs are resolved: "evaluator" is the embedded
// Fashion-MNIST classifier unless a folder of that name exists; anything else is a folder
// (docs/evaluation.md). ONNX Runtime must be initialised.
func OpenEvaluator(name string, opt onnxrt.SessionOptions) (*fid.Evaluator, error) {
	if name == "evaluator" {
		if st, err := os.Stat(name); err != nil || !st.IsDir() {
			return fid.LoadEvaluator(models.FS, "evaluator", path.Join("embedded", "evaluator"), opt)
		}
	}
	return fid.LoadEvaluator(os.DirFS(name), ".", name, opt)
}
