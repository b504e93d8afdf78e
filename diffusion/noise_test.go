package diffusion

import (
	"slices"
	"testing"
)

// TestTokenNoisePinned pins the noise a (seed, image, position) draws: a seed's image must stay
// the same from one version to the next, and the GPU's fused head and the CPU's per-step head
// must read the same values. The numbers were printed by the implementation of 2026-11-27,
// which kept x_T and each step's epsilon in slices of their own.
func TestTokenNoisePinned(t *testing.T) {
	n := NewTokenNoise(7, 3, 5, 2, 3)
	wantXT := []float64{0.19012880008572394, 0.8737868050746185, -0.5792905527052936}
	wantEps := [][]float64{{-0.16707747600072975, -0.2697348021934687, 0.41636471335245867},
		{0.11839696817880152, -0.9798937848106775, -2.016140982796415}}
	if !slices.Equal(n.XT, wantXT) || len(n.Eps) != 2 || !slices.Equal(n.Eps[0], wantEps[0]) || !slices.Equal(n.Eps[1], wantEps[1]) {
		t.Errorf("NewTokenNoise(7, 3, 5, 2, 3) = %v %v, want %v %v", n.XT, n.Eps, wantXT, wantEps)
	}
	s := NewTokenNoiseSalted(7, 11, 3, 5, 1, 2)
	if want := []float64{0.10619312135039422, 0.7228913681293764}; !slices.Equal(s.XT, want) ||
		!slices.Equal(s.Eps[0], []float64{-1.0975864446791945, 0.5501940360468385}) {
		t.Errorf("NewTokenNoiseSalted(7, 11, 3, 5, 1, 2) = %v %v, want %v [[-1.0975864446791945 0.5501940360468385]]", s.XT, s.Eps, want)
	}
	// the slices share one array: a write past one step's end must not reach the next step
	n.XT = append(n.XT, 1)
	if n.Eps[0][0] != wantEps[0][0] {
		t.Error("appending to x_T overwrote the first step's epsilon: the slices' capacity runs past their length")
	}
}
