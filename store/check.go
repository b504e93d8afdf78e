package store

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"marspec/api"
)

// The store check: objects without a record (a write whose record never came, a delete cut
// short) and records without an object (bytes lost). Jobs still queued or running are left
// out: their objects are written before their records, so one may be between the two.
//
// It is safe on a live store (servers creating, running and sweeping jobs meanwhile). Records
// are read before the objects are listed, so a record read had its object already (objects
// are written first); but a job created after that read, or one that ended after it, may have
// objects the read did not see. So every suspect found by comparing the two is looked at
// again after the listing, and stays one only if it still is: an object whose job has no
// record now, or whose finished job has no record of it now; a record whose finished job
// still has it and whose object is still missing. A job unfinished or expired by then is left
// alone, as in the first read.

// Orphans is what Check found, as blob keys ("JOB/INDEX.png") and image ids.
type Orphans struct {
	ObjectsWithoutRecord []string
	RecordsWithoutObject []string
	// Expired are finished jobs past their retention and the sweep's grace, which the sweep
	// has not removed yet (or removed in part: their objects first). Their objects and records
	// are no orphans; the repair finishes their removal, as the sweep would.
	Expired        []string
	JobsChecked    int
	ObjectsChecked int
}

// checkPage is how many jobs the check reads at a time (by cursor: no page grows).
const checkPage = 500

// Check lists the orphans both ways. grace is the sweep's: the jobs it takes for expired are
// those the sweep's own list (Expired at SweepCut) names.
func (s *Store) Check(grace time.Duration) (Orphans, error) {
	var o Orphans
	recorded := map[string]string{} // blob key -> image id, of finished jobs
	busy := map[string]bool{}       // jobs whose objects may be ahead of their records
	expired, err := s.sweepable(grace)
	if err != nil {
		return o, err
	}
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
			ids[i] = j.ID
			if j.Status == api.StatusQueued || j.Status == api.StatusRunning {
				busy[j.ID] = true
			}
			if expired[j.ID] {
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
	var objects []string // suspects: no record of them was read
	err = s.Blobs.Keys(func(key string) error {
		o.ObjectsChecked++
		stored[key] = true
		job, _, _ := strings.Cut(key, "/")
		if _, ok := recorded[key]; !ok && !busy[job] {
			objects = append(objects, key)
		}
		return nil
	})
	if err != nil {
		return o, err
	}
	var records []string // suspects: their objects were not listed
	for key := range recorded {
		if !stored[key] {
			records = append(records, key)
		}
	}
	if len(objects)+len(records) == 0 {
		return o, nil
	}
	if expired, err = s.sweepable(grace); err != nil { // as of now: some may have expired meanwhile
		return o, err
	}
	o.ObjectsWithoutRecord, o.RecordsWithoutObject, err = s.confirm(objects, records, expired)
	return o, err
}

// sweepable are the jobs the sweep would remove now (its grace given): the sweep's own list,
// at the store's clock.
func (s *Store) sweepable(grace time.Duration) (map[string]bool, error) {
	now, err := s.Now()
	if err != nil {
		return nil, err
	}
	jobs, err := s.Expired(SweepCut(now, grace), math.MaxInt32)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		ids[j.ID] = true
	}
	return ids, nil
}

// confirm looks again, after the listing, at the suspects of Check (blob keys both) and
// returns those that still are orphans: objects, and the image ids of records.
func (s *Store) confirm(objects, records []string, expired map[string]bool) (orphanObjects, orphanRecords []string, err error) {
	byJob := map[string][]string{}
	for _, key := range append(slices.Clip(objects), records...) {
		job, _, _ := strings.Cut(key, "/")
		byJob[job] = append(byJob[job], key)
	}
	isRecord := map[string]bool{}
	for _, key := range records {
		isRecord[key] = true
	}
	for job, keys := range byJob {
		j, err := s.Job(job)
		switch {
		case errors.Is(err, ErrNotFound): // no record of the job now: its objects are orphans, its records went with it
			for _, key := range keys {
				if !isRecord[key] {
					orphanObjects = append(orphanObjects, key)
				}
			}
			continue
		case err != nil:
			return nil, nil, err
		case j.Status == api.StatusQueued || j.Status == api.StatusRunning || expired[job]:
			continue // it runs again, or the sweep's now
		}
		imgs, err := s.Images(job)
		if err != nil {
			return nil, nil, err
		}
		has := map[string]string{}
		for _, im := range imgs {
			has[blobKey(im.JobID, im.Index)] = im.ID
		}
		for _, key := range keys {
			id, ok := has[key]
			switch {
			case !isRecord[key]:
				if !ok {
					orphanObjects = append(orphanObjects, key)
				}
			case ok:
				_, err := s.Blobs.Get(key)
				if errors.Is(err, ErrNotFound) {
					orphanRecords = append(orphanRecords, id)
				} else if err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return orphanObjects, orphanRecords, nil
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
