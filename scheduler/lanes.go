package scheduler

import (
	"sync"

	"marspec/generation"
)

// laneSet is the batch of one engine group split over engines ("lanes") stepped side by side.
// One engine steps its batch one call after another, with the Go work of a step (sampling,
// acceptance, decoding) between the calls, so on a CPU with several cores one engine keeps
// about one core busy. Lanes share the graphs (onnxrt.Graph runs calls on one session side by
// side) and split the images, so each core has a step to run. An image's result does not
// depend on its batch-mates (the reason groups merge at all), so which lane it joins does not
// change its bytes. A group whose images do depend on their batch-mates (alone) keeps one lane.
type laneSet struct {
	max   int
	lanes []engine
	open  func(generation.Models, *generation.Plan) (engine, error) // newEngine; tests swap it
}

func newLaneSet(lanes int) *laneSet { return &laneSet{max: max(lanes, 1), open: newEngine} }

// add puts the image into the lane with the fewest images, opening a new lane first while
// every lane has some and the set has room for another.
func (l *laneSet) add(models generation.Models, job string, p *generation.Plan, index int) error {
	pick := -1
	for i, e := range l.lanes {
		if pick < 0 || e.active() < l.lanes[pick].active() {
			pick = i
		}
	}
	if pick < 0 || (l.lanes[pick].active() > 0 && len(l.lanes) < l.max) {
		e, err := l.open(models, p)
		if err != nil {
			return err
		}
		l.lanes = append(l.lanes, e)
		pick = len(l.lanes) - 1
	}
	return l.lanes[pick].add(job, p, index)
}

func (l *laneSet) remove(job string) {
	for _, e := range l.lanes {
		e.remove(job)
	}
}

func (l *laneSet) drop() {
	for _, e := range l.lanes {
		e.drop()
	}
}

func (l *laneSet) active() int {
	n := 0
	for _, e := range l.lanes {
		n += e.active()
	}
	return n
}

// sizes are the images each busy lane will step next (OnStep reports them one by one).
func (l *laneSet) sizes() []int {
	var s []int
	for _, e := range l.lanes {
		if n := e.active(); n > 0 {
			s = append(s, n)
		}
	}
	return s
}

func (l *laneSet) known() map[string]partial {
	all := map[string]partial{}
	for _, e := range l.lanes {
		for job, n := range e.known() {
			all[job] = all[job].plus(n)
		}
	}
	return all
}

// step steps every busy lane, side by side when there are several, and returns their finished
// images in lane order. An error from any lane is returned (the worker fails the group).
func (l *laneSet) step() ([]finished, error) {
	var busy []engine
	for _, e := range l.lanes {
		if e.active() > 0 {
			busy = append(busy, e)
		}
	}
	if len(busy) == 1 {
		return busy[0].step()
	}
	done := make([][]finished, len(busy))
	errs := make([]error, len(busy))
	var wg sync.WaitGroup
	for i, e := range busy {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done[i], errs[i] = e.step()
		}()
	}
	wg.Wait()
	var all []finished
	for i := range busy {
		if errs[i] != nil {
			return nil, errs[i]
		}
		all = append(all, done[i]...)
	}
	return all, nil
}
