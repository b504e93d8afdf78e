package scheduler

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
)

// Images spread over the lanes, the emptiest first, a new lane opening while every lane has
// some; one lane keeps them all.
func TestLanesSpreadImages(t *testing.T) {
	models, _ := generation.TestModels()
	p := plan(t, api.GenerateRequest{Class: api.Classes{"0"}, N: 7, Seed: u64(1), Mode: "target"})
	for _, c := range []struct {
		lanes int
		want  []int
	}{{1, []int{7}}, {3, []int{3, 2, 2}}, {8, []int{1, 1, 1, 1, 1, 1, 1}}} {
		l := newLaneSet(c.lanes)
		for i := range 7 {
			if err := l.add(models, "a", &p, i); err != nil {
				t.Fatal(err)
			}
		}
		if got := l.sizes(); !slices.Equal(got, c.want) {
			t.Errorf("%d lanes: sizes %v, want %v", c.lanes, got, c.want)
		}
		if l.active() != 7 || l.known()["a"] != (partial{}) {
			t.Errorf("%d lanes: active %d, known %v", c.lanes, l.active(), l.known())
		}
		l.drop() // what a failed group does before dropping its engine: every lane lets go
		if l.active() != 0 {
			t.Errorf("%d lanes: %d images left after drop", c.lanes, l.active())
		}
	}
}

// meetEngine's step waits until every lane of its set is inside a step: lanes stepped one
// after another never meet (the test fails after its timeout).
type meetEngine struct {
	n      int
	inside *sync.WaitGroup
	all    chan struct{}
	err    error
}

func (e *meetEngine) add(string, *generation.Plan, int) error { e.n++; return nil }
func (e *meetEngine) remove(string)                           {}
func (e *meetEngine) drop()                                   {}
func (e *meetEngine) active() int                             { return e.n }
func (e *meetEngine) known() map[string]partial               { return nil }
func (e *meetEngine) step() ([]finished, error) {
	e.inside.Done()
	select {
	case <-e.all:
	case <-time.After(10 * time.Second):
		return nil, errors.New("the other lanes never stepped while this one did: lanes are stepped one after another")
	}
	return []finished{{job: "a"}}, e.err
}

func TestLanesStepSideBySide(t *testing.T) {
	const lanes = 3
	var inside sync.WaitGroup
	inside.Add(lanes)
	all := make(chan struct{})
	go func() { inside.Wait(); close(all) }()
	l := newLaneSet(lanes)
	l.open = func(generation.Models, *generation.Plan) (engine, error) {
		return &meetEngine{inside: &inside, all: all}, nil
	}
	var models generation.Models
	for i := range lanes {
		if err := l.add(models, "a", nil, i); err != nil {
			t.Fatal(err)
		}
	}
	done, err := l.step()
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != lanes {
		t.Fatalf("%d finished images, want one per lane (%d)", len(done), lanes)
	}
	// a failing lane fails the step
	l.lanes[1].(*meetEngine).err = errors.New("lane broke")
	inside.Add(lanes)
	all2 := make(chan struct{})
	for _, e := range l.lanes {
		e.(*meetEngine).all = all2
	}
	go func() { inside.Wait(); close(all2) }()
	if _, err := l.step(); err == nil || err.Error() != "lane broke" {
		t.Fatalf("a lane's error was lost: %v", err)
	}
}
