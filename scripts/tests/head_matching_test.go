package tests

import (
	"os"
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
	cmd := exec.Command(python, "test_head_matching.py")
	// one thread in every pool: torch.set_num_threads leaves OpenBLAS's and OpenMP's own threads
	// spinning, which made this script three times the CPU and seven times the wall time here
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("test_head_matching.py: %v\n%s", err, out)
	}
}
