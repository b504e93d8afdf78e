package mar_test

import (
	"math"
	"strings"
	"testing"

	"marspec/mar"
	"marspec/mar/analytic"
)

func annealModel() *mar.Model {
	return analytic.New(analytic.Params{Name: "anneal", SeqLen: 12, TokenDim: 3,
		Base:       []float64{0.3, -0.2, 0.5, 0, -0.4, 0.1, 0.2, -0.1, 0.4, 0.05, -0.3, 0.15},
		ClassShift: 0.02, Coupling: 0.6, Scale: 0.3, VarInterp: 0.2, Steps: 20, Classes: 3})
}

func TestStepsAtAnneals(t *testing.T) {
	opt := mar.Options{Steps: 50, StepsLate: 10}
	got := []int{}
	for k := 0; k < 5; k++ {
		got = append(got, mar.StepsAt(opt, k, 5))
	}
	want := []int{50, 40, 30, 20, 10}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("annealed steps %v, want %v", got, want)
		}
	}
	if s := mar.StepsAt(mar.Options{Steps: 50}, 3, 5); s != 50 {
		t.Fatalf("no annealing gave %d steps", s)
	}
	if s := mar.StepsAt(opt, 0, 1); s != 50 {
		t.Fatalf("a single AR step gave %d steps, want Steps", s)
	}
}

// Annealing changes only the tokens of AR steps that get fewer diffusion steps: the first AR
// step is untouched, later ones differ, and StepsLate = Steps is no annealing at all.
func TestAnnealingChangesOnlyLateSteps(t *testing.T) {
	m := annealModel()
	classes := []int{0, 1, 2, 1}
	base := mar.Options{Seed: 4, NumIter: 4, Steps: 20, FinalStepNoise: true}
	plain, err := m.Generate(classes, base)
	if err != nil {
		t.Fatal(err)
	}
	same := base
	same.StepsLate = 20
	noop, err := m.Generate(classes, same)
	if err != nil {
		t.Fatal(err)
	}
	annealed := base
	annealed.StepsLate = 4
	late, err := m.Generate(classes, annealed)
	if err != nil {
		t.Fatal(err)
	}
	L, D := 12, 3
	first := mar.StepSizes(L, 4)[0]
	for i := range classes {
		order := mar.OrderFor(base.Seed, i, L)
		changed := 0
		for k, pos := range order {
			for j := 0; j < D; j++ {
				p, n, a := plain[i].Tokens[pos*D+j], noop[i].Tokens[pos*D+j], late[i].Tokens[pos*D+j]
				if p != n {
					t.Fatalf("image %d: StepsLate = Steps changed token %d", i, pos)
				}
				if k < first && p != a {
					t.Fatalf("image %d: annealing changed a first-step token (order %d)", i, k)
				}
				if k >= first && p != a {
					changed++
				}
			}
		}
		if changed == 0 {
			t.Fatalf("image %d: annealing to 4 steps changed no late token", i)
		}
	}
}

func TestStepsLateValidation(t *testing.T) {
	m := annealModel()
	for _, late := range []int{-1, 21} {
		opt := mar.Options{Steps: 20, StepsLate: late}
		if err := m.Validate(&opt); err == nil {
			t.Fatalf("steps-late %d accepted with steps 20", late)
		}
	}
}

// Model.Validate alone (not only the CLI's and the service's checks) refuses NaN and infinite
// guidance and temperature, naming the field and the allowed range.
func TestValidateRejectsNaN(t *testing.T) {
	m := annealModel()
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		opt  mar.Options
		want string
	}{
		{mar.Options{CFG: nan}, "cfg NaN out of range (allowed: 1 to 50"},
		{mar.Options{CFG: inf}, "cfg +Inf out of range"},
		{mar.Options{Temperature: nan}, "temperature NaN out of range (allowed: 0.05 to 5)"},
		{mar.Options{Temperature: -inf}, "temperature -Inf out of range"},
	} {
		opt := c.opt
		if err := m.Validate(&opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.opt, err, c.want)
		}
	}
}
