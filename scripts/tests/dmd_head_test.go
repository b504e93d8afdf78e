package tests

import (
	"os/exec"
	"testing"
)

// The distribution-matching head's objective against an analytic teacher (Gaussian tokens per
// context, exact epsilon): scripts/tests/test_dmd_head.py trains a tiny student from a point
// mass with dmd_head.dmd_update alone and checks its K = 1, 2, 4 samples' means and spread over
// 64 contexts x 400 samples (tolerances in the script), that the same check fails at the start,
// that the gradient vanishes when the two scores agree, and the ONNX read-back of the start.
func TestDMDHeadMatchesAnAnalyticTeacher(t *testing.T) {
	needTorch(t)
	if out, err := exec.Command(python, "test_dmd_head.py").CombinedOutput(); err != nil {
		t.Fatalf("test_dmd_head.py: %v\n%s", err, out)
	}
}
