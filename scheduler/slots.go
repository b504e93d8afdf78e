package scheduler

import "marspec/generation"

// The slots of a batch are the server's, not a group's: images in flight in all engines
// together never exceed Config.MaxBatch, whatever mix of packs, precisions and speculative
// configurations is queued, so memory stays that of one batch as the queue fills. The next
// image to start anywhere is one of the head job: the highest-ranked job of the whole queue
// with images left to admit (Scheduler.queue, in rank order). Only the head's worker admits;
// a job behind it waits even if its own group has room, and whatever frees a slot or changes
// the head wakes the head's worker (wakeHead), so a free slot never waits for a worker that
// sleeps. Within a group images of several jobs still share one batch: the head's worker
// admits the head's images, and then the next job's if that one is of its group too.
//
// A job whose group is its own (groupKey names the job: its images depend on the images
// beside them) keeps the batch it would have alone, so the same request still gives the same
// images: it starts only when its first batch fits, min(MaxBatch, images), and then keeps
// those slots, refilling them from its own images whatever the head, until all have joined.

// used counts the slots held (s.mu held): images in flight, and the slots a started job that
// runs alone keeps for its next images.
func (s *Scheduler) used() int {
	n := 0
	for _, r := range s.jobs {
		switch {
		case r.ending:
		case r.alone && r.started:
			n += min(s.cfg.MaxBatch, r.inFlight+r.left)
		default:
			n += r.inFlight
		}
	}
	return n
}

// head returns the job whose images start next, or nil (s.mu held). It drops from the queue
// the jobs that ended or have no image left to admit; a cancelled job is passed over (its
// worker ends it).
func (s *Scheduler) head() *running {
	keep := s.queue[:0]
	var first *running
	for _, r := range s.queue {
		if r.ending || r.left == 0 || s.jobs[r.job.ID] != r {
			continue
		}
		keep = append(keep, r)
		if first == nil && !r.cancelled && r.stop == nil {
			first = r
		}
	}
	clear(s.queue[len(keep):])
	s.queue = keep
	return first
}

// room is how many images of r may join now (s.mu held).
func (s *Scheduler) room(r *running) int {
	switch {
	case r.alone && r.started:
		return s.cfg.MaxBatch - r.inFlight // its own slots
	case r.alone:
		if first := min(s.cfg.MaxBatch, r.left); s.cfg.MaxBatch-s.used() >= first {
			return first
		}
		return 0
	default:
		return max(0, s.cfg.MaxBatch-s.used())
	}
}

// wakeHead wakes the worker of the head job unless it is self (which looks again anyway)
// (s.mu held).
func (s *Scheduler) wakeHead(self *worker) {
	r := s.head()
	if r == nil {
		return
	}
	if w := s.workers[r.group]; w != nil && w != self {
		w.poke()
	}
}

// alone reports whether a job's group is its own (groupKey names the job): auto gamma adapts
// to the batch it runs in, so its images depend on the images beside them.
func alone(p *generation.Plan) bool { return p.Spec != nil && p.Spec.AutoGamma }

// skipDone moves r.next past images made before (a resumed job).
func (r *running) skipDone() {
	for r.next < r.job.Plan.Images() && r.job.Done[r.next] {
		r.next++
	}
}
