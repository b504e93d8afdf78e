package scheduler

import (
	"fmt"
	"time"

	"marspec/api"
)

// worker runs one engine group: it admits images of its pending jobs when the head of the
// whole queue is one of them and the server has free slots (slots.go), steps the engine,
// hands finished images to the sink and ends jobs. Its engine goes while nothing is in
// flight; the worker exits when it has no jobs (a later job of its group starts a new one)
// or at shutdown.
//
// The sink is never called under s.mu: its calls write to a database that may be slow or
// away, and every worker, Submit, Cancel and Depth wait on s.mu. What happens under the lock
// is noted (notes) and told to the sink after it is released (tell).
type worker struct {
	s       *Scheduler
	key     string
	wake    chan struct{}
	pending []*running // jobs with images to run, in rank order (queueorder.go); guarded by s.mu
	eng     *laneSet   // nil while nothing is in flight
	notes   []note     // for the sink, in order; guarded by s.mu
	// stored takes finished images to storeLoop, which stores them while the engine steps on;
	// storing holds one token per batch of images not yet stored (storeQueue)
	stored  chan storeBatch
	storing chan struct{}
	// alone: the group is one job whose images depend on their batch-mates; it stores each
	// step's images before the next step, as it would alone, so it refills its slots alike
	alone bool
	// unstored are jobs whose image could not be stored: storeLoop ended them, the worker
	// takes their images out of its engine (the engine is the worker's alone); guarded by s.mu
	unstored []string
}

// note is one sink call waiting for the lock to be released: a start, progress or an end.
type note struct {
	r        *running
	start    bool
	progress *api.Progress
	end      bool
	err      error
}

// tell makes the noted sink calls, outside the lock. An ended job leaves s.jobs only after
// its Finished returns: until then Has still sees it, so its id is not admitted again while
// the end of the earlier run is being written.
func (w *worker) tell() {
	s := w.s
	s.mu.Lock()
	notes := w.notes
	w.notes = nil
	s.mu.Unlock()
	for _, n := range notes {
		id := n.r.job.ID
		switch {
		case n.start:
			s.cfg.Sink.Started(id, n.r.start)
		case n.progress != nil:
			s.cfg.Sink.Progress(id, *n.progress)
		case n.end:
			s.cfg.Sink.Finished(id, n.err)
			s.mu.Lock()
			if s.jobs[id] == n.r {
				delete(s.jobs, id)
			}
			s.mu.Unlock()
		}
	}
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) run() {
	defer w.s.wg.Done()
	defer close(w.stored) // storeLoop stores what it was given, then ends
	for {
		select {
		case <-w.s.quit:
			return
		default:
		}
		if gate := w.s.gate(); gate != nil {
			select {
			case <-gate:
			case <-w.s.quit:
				return
			}
		}
		err := w.admit()
		w.tell()
		if err != nil {
			w.failAll(err)
			w.tell()
			continue
		}
		if w.eng == nil || w.eng.active() == 0 {
			w.eng = nil // an idle engine holds no memory while others use the slots; made again on use
			if w.retireIfIdle() {
				return
			}
			select {
			case <-w.wake:
			case <-w.s.quit:
				return
			}
			continue
		}
		sizes := w.eng.sizes()
		done, err := w.eng.step()
		if w.s.cfg.OnStep != nil {
			for _, n := range sizes {
				w.s.cfg.OnStep(w.key, n)
			}
		}
		if err != nil {
			w.failAll(fmt.Errorf("engine step: %w", err))
			w.tell()
			continue
		}
		b := w.batch(done)
		if w.alone { // refill its slots as it would alone: after the images are stored (slots.go)
			w.deliver(b)
			w.tell()
			continue
		}
		if len(b.done) > 0 {
			w.storing <- struct{}{} // released by storeLoop once stored
		}
		w.stored <- b
	}
}

// admit ends cancelled jobs and those past their queue deadline, refills the slots a job that
// runs alone keeps, and lets images of the head job join while it is of this group and the
// server has room (slots.go).
func (w *worker) admit() error {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, id := range w.unstored {
		if w.eng != nil {
			w.eng.remove(id)
		}
	}
	w.unstored = nil
	keep := w.pending[:0]
	for _, r := range w.pending {
		if r.cancelled {
			if w.eng != nil {
				w.eng.remove(r.job.ID)
			}
			if w.end(r, ErrCancelled); !r.ending {
				keep = append(keep, r) // ends when its images being stored are (end)
			}
			continue
		}
		if r.expired(now) {
			w.end(r, ErrQueueDeadline)
			continue
		}
		keep = append(keep, r)
	}
	clear(w.pending[len(keep):])
	w.pending = keep
	for _, r := range w.pending {
		if r.alone && r.started {
			if err := w.join(r, s.room(r)); err != nil {
				return err
			}
		}
	}
	for {
		r := s.head()
		if r == nil || r.group != w.key || (s.cfg.Isolate && w.othersInFlight(r)) {
			break
		}
		n := s.room(r)
		if n == 0 {
			break
		}
		if err := w.join(r, n); err != nil {
			return err
		}
	}
	for _, r := range w.pending {
		if r.left == 0 && r.inFlight == 0 && r.done == r.job.Plan.Images() {
			w.end(r, nil) // a resumed job whose images were all made already
		}
	}
	w.compact()
	s.wakeHead(w)
	return nil
}

// join adds up to n images of r to the engine, made on first use (s.mu held).
func (w *worker) join(r *running, n int) error {
	for ; n > 0 && r.left > 0; n-- {
		if w.eng == nil {
			w.eng = newLaneSet(w.lanes())
		}
		if err := w.eng.add(w.s.cfg.Models, r.job.ID, &r.job.Plan, r.next); err != nil {
			return err
		}
		if !r.started {
			r.started, r.start = true, w.s.now()
			r.doneAtStart = r.done
			w.notes = append(w.notes, note{r: r, start: true})
		}
		r.next++
		r.left--
		r.inFlight++
		r.skipDone()
	}
	return nil
}

// othersInFlight reports whether the engine holds images of a job other than r (Isolate: an
// engine runs one job at a time) (s.mu held).
func (w *worker) othersInFlight(r *running) bool {
	for _, o := range w.pending {
		if o != r && o.inFlight > 0 {
			return true
		}
	}
	return false
}

// storeQueue is how many engine steps' finished images may wait for the storer: the engine
// steps on while they are written (an image's file and record, fsynced, cost about as much as
// a step of the default request), and blocks when the storer falls this far behind. Waiting
// images keep their slots, so the bound on images in flight holds. Steps that finish no image
// hand over only their progress, up to stepQueue of them.
const (
	storeQueue = 2
	stepQueue  = 64
)

// storeBatch is one step's finished images, with how far each job was at that step and when
// the step ended: the rate is of the work done by then, not by when the storer gets to it.
type storeBatch struct {
	done []finished
	jobs map[string]partial
	at   time.Time
}

// lanes is how many engines the group may step side by side: one when its images depend on
// their batch-mates (alone), else Config.Lanes (newLaneSet takes 0 as one).
func (w *worker) lanes() int {
	if w.alone {
		return 1
	}
	return w.s.cfg.Lanes
}

// batch makes a step's finished images ready for the storer. The tokens each job has done are
// counted here, where every image is in one place (stored, waiting to be stored, or in the
// engine), so progress never counts an image twice or goes back.
func (w *worker) batch(done []finished) storeBatch {
	s := w.s
	known := w.eng.known()
	s.mu.Lock()
	for _, d := range done {
		if r := s.jobs[d.job]; r != nil && !r.ending {
			r.storing++
		}
	}
	jobs := make(map[string]partial, len(w.pending))
	for _, r := range w.pending {
		n := r.done + r.storing
		jobs[r.job.ID] = partial{n * r.job.Plan.SeqLen, float64(n)}.plus(known[r.job.ID])
	}
	s.mu.Unlock()
	return storeBatch{done: done, jobs: jobs, at: s.now()}
}

// storeLoop stores the images the worker hands off, in step order, reports progress and ends
// complete jobs; one per worker, so a job's images, progress and end reach the sink in order.
func (w *worker) storeLoop() {
	defer w.s.wg.Done()
	for b := range w.stored {
		w.deliver(b)
		if len(b.done) > 0 {
			<-w.storing
		}
		w.tell()
		w.poke() // slots were freed and jobs may have ended: the worker admits or retires
	}
}

// deliver stores finished images (storeimages.go), reports progress and ends complete jobs.
func (w *worker) deliver(b storeBatch) {
	s := w.s
	w.storeImages(b.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range w.pending {
		if s.jobs[r.job.ID] != r || r.ending {
			continue
		}
		if r.stop != nil {
			w.end(r, r.stop) // once none of its images is being stored
			continue
		}
		L := r.job.Plan.SeqLen
		total := r.job.Plan.Images()
		at, ok := b.jobs[r.job.ID]
		if !ok { // joined after this step
			at = partial{r.done * L, float64(r.done)}
		}
		p := api.Progress{ImagesDone: r.done, ImagesTotal: total, TokensDone: max(at.tokens, r.done*L), TokensTotal: total * L}
		p.Fraction = float64(p.TokensDone) / float64(max(1, p.TokensTotal))
		if r.started { // a job waiting for slots has no start to count from (a resumed one has tokens)
			images := max(at.images, float64(r.done))
			withRate(&p, p.TokensDone-r.doneAtStart*L, images-float64(r.doneAtStart), float64(total)-images, b.at.Sub(r.start))
		}
		w.notes = append(w.notes, note{r: r, progress: &p})
		if r.done == total && r.inFlight == 0 {
			w.end(r, nil)
		}
	}
	w.compact()
	s.wakeHead(w) // slots were freed: the head may be another group's
}

// end finishes a job once (s.mu held); tell reports it. A job whose images wait for the
// storer ends when they are stored or dropped (deliver): the sink never gets an image of a job
// after its end, and a cancelled job's images are not written after it is gone.
func (w *worker) end(r *running, err error) {
	if w.s.jobs[r.job.ID] != r || r.ending {
		return
	}
	if r.storing > 0 {
		if r.stop == nil {
			r.stop = err
		}
		return
	}
	r.ending = true
	w.notes = append(w.notes, note{r: r, end: true, err: err})
}

// compact drops ended jobs from pending (s.mu held).
func (w *worker) compact() {
	keep := w.pending[:0]
	for _, r := range w.pending {
		if w.s.jobs[r.job.ID] == r && !r.ending {
			keep = append(keep, r)
		}
	}
	clear(w.pending[len(keep):])
	w.pending = keep
}

// failAll ends every job of the group with err and drops the engine (its state is unknown).
func (w *worker) failAll(err error) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := w.pending[:0]
	for _, r := range w.pending {
		if w.end(r, err); !r.ending {
			keep = append(keep, r) // ends when its images being stored are (end)
		}
	}
	clear(w.pending[len(keep):])
	w.pending = keep
	if w.eng != nil {
		w.eng.drop()
	}
	w.eng = nil
	s.wakeHead(w)
}

// retireIfIdle removes the worker when it has no jobs (under the lock, so Submit either sees
// it gone and starts another, or hands it the job before it leaves).
func (w *worker) retireIfIdle() bool {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(w.pending) > 0 {
		return false
	}
	if s.workers[w.key] == w {
		delete(s.workers, w.key)
	}
	return true
}
