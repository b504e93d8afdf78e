package scheduler

import (
	"fmt"
	"time"

	"marspec/api"
)

// worker runs one engine group: it admits images of its pending jobs while slots are free,
// steps the engine, hands finished images to the sink and ends jobs. It exits when it has
// nothing to do (a later job of its group starts a new one) or at shutdown.
type worker struct {
	s       *Scheduler
	key     string
	wake    chan struct{}
	pending []*running // jobs with images to run, in arrival order; guarded by s.mu
	eng     engine
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) run() {
	defer w.s.wg.Done()
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
		if err := w.admit(); err != nil {
			w.failAll(err)
			continue
		}
		if w.eng == nil || w.eng.active() == 0 {
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
		n := w.eng.active()
		done, err := w.eng.step()
		if w.s.cfg.OnStep != nil {
			w.s.cfg.OnStep(w.key, n)
		}
		if err != nil {
			w.failAll(fmt.Errorf("engine step: %w", err))
			continue
		}
		w.deliver(done)
	}
}

// admit ends cancelled jobs and lets images join while the batch has room.
func (w *worker) admit() error {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := w.pending[:0]
	for _, r := range w.pending {
		if r.cancelled {
			if w.eng != nil {
				w.eng.remove(r.job.ID)
			}
			w.end(r, ErrCancelled)
			continue
		}
		keep = append(keep, r)
	}
	clear(w.pending[len(keep):])
	w.pending = keep
	busy := false // Isolate: a job before this one still has images to make or in flight
	for _, r := range w.pending {
		if s.cfg.Isolate && busy {
			break
		}
		for r.next < r.job.Plan.Images() {
			if r.job.Done[r.next] {
				r.next++
				continue
			}
			if w.eng == nil {
				eng, err := newEngine(s.cfg.Models, &r.job.Plan)
				if err != nil {
					return err
				}
				w.eng = eng
			}
			if w.eng.active() >= s.cfg.MaxBatch {
				return nil
			}
			if err := w.eng.add(r.job.ID, &r.job.Plan, r.next); err != nil {
				return err
			}
			if !r.started {
				r.started, r.start = true, time.Now()
				s.cfg.Sink.Started(r.job.ID, r.start)
			}
			r.next++
			r.inFlight++
		}
		if r.inFlight == 0 && r.done == r.job.Plan.Images() {
			w.end(r, nil) // a resumed job whose images were all made already
			continue
		}
		busy = true
	}
	w.compact()
	return nil
}

// deliver stores finished images, reports progress and ends complete jobs.
func (w *worker) deliver(done []finished) {
	s := w.s
	for _, d := range done {
		s.mu.Lock()
		r := s.jobs[d.job]
		s.mu.Unlock()
		if r == nil {
			continue
		}
		d.img.Seconds = time.Since(r.start).Seconds()
		err := s.cfg.Sink.Image(d.job, d.img) // outside the lock: it writes files
		s.mu.Lock()
		r.inFlight--
		r.done++
		if err != nil {
			w.eng.remove(r.job.ID)
			w.end(r, fmt.Errorf("storing image %d: %w", d.img.Index, err))
		}
		s.mu.Unlock()
	}
	known := w.eng.known()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range w.pending {
		if s.jobs[r.job.ID] != r {
			continue
		}
		L := r.job.Plan.SeqLen
		total := r.job.Plan.Images()
		p := api.Progress{ImagesDone: r.done, ImagesTotal: total, TokensDone: r.done*L + known[r.job.ID], TokensTotal: total * L}
		p.Fraction = float64(p.TokensDone) / float64(max(1, p.TokensTotal))
		s.cfg.Sink.Progress(r.job.ID, p)
		if r.done == total && r.inFlight == 0 {
			w.end(r, nil)
		}
	}
	w.compact()
}

// end finishes a job once (s.mu held).
func (w *worker) end(r *running, err error) {
	if w.s.jobs[r.job.ID] != r {
		return
	}
	delete(w.s.jobs, r.job.ID)
	w.s.cfg.Sink.Finished(r.job.ID, err)
}

// compact drops ended jobs from pending (s.mu held).
func (w *worker) compact() {
	keep := w.pending[:0]
	for _, r := range w.pending {
		if w.s.jobs[r.job.ID] == r {
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
	for _, r := range w.pending {
		w.end(r, err)
	}
	w.pending = nil
	w.eng = nil
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
