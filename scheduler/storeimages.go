package scheduler

import (
	"fmt"

	"marspec/generation"
)

// JobImage is a finished image of a job, for the sink to store.
type JobImage struct {
	Job   string
	Image generation.Image
}

// storeImages hands a step's finished images to the sink in one call, so that it can write
// them side by side: where the store is a server (PostgreSQL and S3), an image's writes are
// round trips and a commit, and the images keep their slots until stored, so one image after
// another held the engine below what it makes. A job that ended meanwhile gets none after its
// end; a failed write ends its job.
func (w *worker) storeImages(done []finished) {
	s := w.s
	batch := make([]JobImage, 0, len(done))
	runs := make([]*running, 0, len(done))
	s.mu.Lock()
	for _, d := range done {
		r := s.jobs[d.job]
		if r == nil || r.ending {
			continue
		}
		if r.stop != nil { // ended while its images waited: store none after the end
			r.inFlight--
			r.storing--
			continue
		}
		d.img.Seconds = s.now().Sub(r.start).Seconds()
		batch = append(batch, JobImage{Job: d.job, Image: d.img})
		runs = append(runs, r)
	}
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	errs := s.cfg.Sink.Images(batch) // outside the lock: it writes files
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range runs {
		r.inFlight--
		r.storing--
		r.done++
		if i < len(errs) && errs[i] != nil {
			w.unstored = append(w.unstored, r.job.ID)
			w.end(r, fmt.Errorf("storing image %d: %w", batch[i].Image.Index, errs[i]))
		}
	}
}

// EachImage stores a step's images one after another with image, for a sink with nothing to
// gain from writing them side by side; the errors are in the batch's order.
func EachImage(batch []JobImage, image func(id string, img generation.Image) error) []error {
	errs := make([]error, len(batch))
	for i, b := range batch {
		errs[i] = image(b.Job, b.Image)
	}
	return errs
}
