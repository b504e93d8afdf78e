package tests

import (
	"os/exec"
	"testing"
)

// The objectives that fine-tune the few-step head toward a distribution (the energy score, the
// pack's; DMD, tried first), against an analytic teacher (Gaussian tokens per context, exact
// epsilon and exact samples): scripts/tests/test_head_matching.py trains a tiny student from a
// point mass with each and checks its K = 1, 2, 4 samples' means and spread over 64 contexts x
// 400 samples (tolerances in the script), that the same check fails at the start, that DMD's
// gradient vanishes when the two scores agree, and the ONNX read-back of the start.
func TestHeadMatchingObjectivesOnAnAnalyticTeacher(t *testing.T) {
	needTorch(t)
	if out, err := exec.Command(python, "test_head_matching.py").CombinedOutput(); err != nil {
		t.Fatalf("test_head_matching.py: %v\n%s", err, out)
	}
}
