package mar_test

import (
	"fmt"
	"slices"
	"testing"

	"marspec/diffusion"
	"marspec/mar"
	"marspec/mar/analytic"
)

func stepperModel() *mar.Model {
	return analytic.New(analytic.Params{Name: "t", SeqLen: 6, TokenDim: 2, Base: []float64{0.3, -0.2, 0.5, 0, -0.4, 0.1},
		ClassShift: 0.02, Coupling: 0.6, Scale: 0.01, Steps: 10, Classes: 3})
}

// alone is the reference: Model.Generate of exactly this one image.
func alone(t *testing.T, m *mar.Model, j mar.StepJob) []float32 {
	t.Helper()
	opt := j.Options
	opt.FirstIndex, opt.Batch = j.Index, 1
	imgs, err := m.Generate([]int{j.Class}, opt)
	if err != nil {
		t.Fatal(err)
	}
	return imgs[0].Tokens
}

// Requests with different seeds, classes, CFG scales and schedules, num_iter, temperatures,
// annealing, final-step noise and head samplers (ddim, the distilled head) join at different steps; every image must equal its
// Model.Generate twin bit for bit, and removing a request must not disturb the others.
func TestStepperMatchesGenerate(t *testing.T) {
	m := analytic.WithDistilled(stepperModel(), 4)
	reqs := [][]mar.StepJob{}
	variants := []mar.Options{
		{Seed: 1},
		{Seed: 2, CFG: 3},
		{Seed: 1, CFG: 2, CFGSchedule: "constant", NumIter: 3},
		{Seed: 7, Temperature: 0.8, NumIter: 2, FinalStepNoise: true},
		{Seed: 9, Steps: 6, StepsLate: 3},
		{Seed: 2, CFG: 3},                                             // same as request 1: identical images, separate owners
		{Seed: 5},                                                     // removed after two steps
		{Seed: 4, Sampler: diffusion.DDIM, Eta: 0.5},                  // the head sampler is the image's own
		{Seed: 4, CFG: 3, Sampler: diffusion.Distilled, Steps: 2},     // the student, guided
		{Seed: 6, Sampler: diffusion.Distilled, Steps: 4, NumIter: 3}, // and unguided
	}
	for r, opt := range variants {
		var js []mar.StepJob
		for i := 0; i < 3; i++ {
			js = append(js, mar.StepJob{Request: fmt.Sprint("r", r), Index: i + r%2, Class: (i + r) % 3, Options: opt})
		}
		reqs = append(reqs, js)
	}
	s := mar.NewStepper(m)
	got := map[string][]float32{}
	const victim = "r6"
	for step := 0; step < 40 && (step < len(reqs) || s.Active() > 0); step++ {
		if step < len(reqs) { // one request joins per step
			for _, j := range reqs[step] {
				if err := s.Add(j); err != nil {
					t.Fatal(err)
				}
			}
		}
		if step == len(reqs) {
			if n := s.Remove(victim); n == 0 {
				t.Fatalf("Remove(%s) removed nothing", victim)
			}
		}
		done, err := s.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range done {
			got[fmt.Sprint(d.Request, "/", d.Image.Index)] = d.Image.Tokens
		}
	}
	if s.Active() != 0 {
		t.Fatalf("%d images still active", s.Active())
	}
	for _, js := range reqs {
		for _, j := range js {
			key := fmt.Sprint(j.Request, "/", j.Index)
			tok, ok := got[key]
			if j.Request == victim {
				if ok { // it needs 6 steps and had 1 before Remove
					t.Errorf("removed image %s finished", key)
				}
				continue
			}
			if !ok {
				t.Fatalf("image %s never finished", key)
			}
			if want := alone(t, m, j); !slices.Equal(tok, want) {
				t.Errorf("image %s differs from Model.Generate:\n got %v\nwant %v", key, tok, want)
			}
		}
	}
	if s.Rows <= s.Forwards {
		t.Errorf("no batching happened: %d rows in %d passes", s.Rows, s.Forwards)
	}
}

// The reference itself must be sensitive to what the test claims is kept: a different index
// gives a different image (otherwise the comparison above proves nothing).
func TestStepperReferenceSensitive(t *testing.T) {
	m := stepperModel()
	a := alone(t, m, mar.StepJob{Index: 0, Options: mar.Options{Seed: 1}})
	b := alone(t, m, mar.StepJob{Index: 1, Options: mar.Options{Seed: 1}})
	if slices.Equal(a, b) {
		t.Fatal("images 0 and 1 are equal: the reference does not depend on the index")
	}
}

func TestStepperRejectsBadJobs(t *testing.T) {
	s := mar.NewStepper(stepperModel())
	for _, j := range []mar.StepJob{
		{Class: 3, Options: mar.Options{Seed: 1}},
		{Class: 0, Options: mar.Options{CFG: 0.5}},
		{Class: 0, Index: -1},
	} {
		if err := s.Add(j); err == nil {
			t.Errorf("Add(%+v) accepted", j)
		}
	}
	if s.Active() != 0 {
		t.Fatalf("rejected jobs joined: %d active", s.Active())
	}
}
