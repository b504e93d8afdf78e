package store

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"marspec/api"
)

// The store check: objects without a record (a write whose record never came, a delete cut
// short) and records without an object (bytes lost). Jobs still queued or running are left
// out: their objects are written before their records, so one may be between the two.

// Orphans is what Check found, as blob keys ("JOB/INDEX.png") and image ids.
type Orphans struct {
	ObjectsWithoutRecord []string
	RecordsWithoutObject []string
	// Expired are finished jobs past their retention, which the sweep has not removed yet (or
	// removed in part: their objects first). Their objects and records are no orphans; the
	// repair finishes their removal, as the sweep would.
	Expired        []string
	JobsChecked    int
	ObjectsChecked int
}

// checkPage is how many jobs the check reads at a time (by cursor: no page grows).
const checkPage = 500

// Check lists the orphans both ways.
func (s *Store) Check() (Orphans, error) {
	var o Orphans
	recorded := map[string]string{} // blob key -> image id, of finished jobs
	busy := map[string]bool{}       // jobs whose objects may be ahead of their records
	known := map[string]bool{}
	now := time.Now()
	cur := Cursor{Created: time.Unix(0, math.MaxInt64)}
	for {
		jobs, err := s.After(Filter{}, checkPage, cur)
		if err != nil {
			return o, err
		}
		if len(jobs) == 0 {
			break
		}
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i], known[j.ID] = j.ID, true
			if j.Status == api.StatusQueued || j.Status == api.StatusRunning {
				busy[j.ID] = true
			}
			if j.ExpiredAt(now) {
				o.Expired, busy[j.ID] = append(o.Expired, j.ID), true // left out like a busy job: the sweep's
			}
		}
		imgs, err := s.ImagesOf(ids)
		if err != nil {
			return o, err
		}
		for _, list := range imgs {
			for _, im := range list {
				if !busy[im.JobID] {
					recorded[blobKey(im.JobID, im.Index)] = im.ID
				}
			}
		}
		o.JobsChecked += len(jobs)
		cur = CursorOf(jobs[len(jobs)-1])
	}
	stored := map[string]bool{}
	err := s.Blobs.Keys(func(key string) error {
		o.ObjectsChecked++
		stored[key] = true
		job, _, _ := strings.Cut(key, "/")
		if _, ok := recorded[key]; !ok && !busy[job] {
			o.ObjectsWithoutRecord = append(o.ObjectsWithoutRecord, key)
		}
		return nil
	})
	if err != nil {
		return o, err
	}
	for key, id := range recorded {
		if !stored[key] {
			o.RecordsWithoutObject = append(o.RecordsWithoutObject, id)
		}
	}
	return o, nil
}

// Repair removes expired jobs (as the sweep does), the objects without a record, and the records without an object with their
// jobs put back to the queue: the missing images are made again (the same bytes: images are
// deterministic) when a server claims or resumes the job.
func (s *Store) Repair(o Orphans) error {
	var errs []error
	for _, id := range o.Expired {
		if err := s.DeleteJob(id); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
	}
	for _, key := range o.ObjectsWithoutRecord {
		if err := s.Blobs.Delete(key); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
	}
	requeued := map[string]bool{}
	for _, id := range o.RecordsWithoutObject {
		job, ok := jobOfImage(id)
		if !ok {
			errs = append(errs, fmt.Errorf("image id %q is not JOB-INDEX", id))
			continue
		}
		if err := s.DeleteImage(id); err != nil {
			errs = append(errs, err)
			continue
		}
		if !requeued[job] {
			requeued[job] = true
			if err := s.Requeue(job); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// jobOfImage is the job of an image id (ImageID backwards).
func jobOfImage(id string) (job string, ok bool) {
	i := strings.LastIndex(id, "-")
	if i < 0 {
		return "", false
	}
	_, err := strconv.Atoi(id[i+1:])
	return id[:i], err == nil
}
