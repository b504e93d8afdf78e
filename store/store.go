// Package store keeps the service's jobs and images. It is two small interfaces: Meta (jobs,
// image records and their statistics) and Blobs (PNG bytes by key), composed by Store. The
// embedded implementations are SQLite (modernc.org/sqlite: pure Go, no cgo) and files under
// the data folder written atomically; for several replicas, Meta on PostgreSQL (which is also
// their shared job queue, Queue) and Blobs on an S3-compatible object store.
package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"marspec/api"
)

// ErrNotFound is returned for unknown job or image ids and missing blobs.
var ErrNotFound = errors.New("not found")

// Job is a stored job.
type Job struct {
	ID       string
	Created  time.Time
	Status   string
	Error    string
	Started  *time.Time
	Finished *time.Time
	Request  api.GenerateRequest // as accepted, with the seed filled in: enough to run it again
	Settings api.Settings
	Attempt  int // claims so far (a shared queue's Claim returns the attempt it began); 0 in SQLite
	// CancelAsked: a DELETE asked to cancel the job before it ended; a restart or a claim
	// ends it as cancelled rather than run it.
	CancelAsked    bool
	Key            string        // the API key (its name) that created the job; "" on a server without keys
	IdempotencyKey string        // the client's Idempotency-Key ("" without one): one job per (Key, IdempotencyKey)
	RequestHash    string        // of the canonical request: tells a retry from another request under the same Idempotency-Key
	Retain         time.Duration // how long the job is kept once it ends, then swept with its images; 0: forever
}

// Image is a stored image record (its PNG is a blob).
type Image struct {
	ID        string
	JobID     string
	Index     int
	Class     int
	ClassName string
	Seconds   float64
	Stats     *api.ImageStats
}

// Filter selects jobs to list; zero values select everything.
type Filter struct {
	Class  *int
	Mode   string
	Status string
	Key    string    // only this API key's jobs ("": every key's)
	Alive  time.Time // leave out jobs expired by then (zero: list them too, as the store check does)
}

// Meta stores jobs and image records. Implementations must be safe for concurrent use.
type Meta interface {
	CreateJob(j Job) error
	SetRunning(id string, at time.Time) error             // queued -> running, keeping the first start
	Finish(id, status, reason string, at time.Time) error // final status and reason, ended at (PostgreSQL: at its own clock, Hosted.Now)
	Requeue(id string) error                              // back to queued (resume after a restart)
	AskCancel(id string) error                            // record that a DELETE asked to cancel the unfinished job (Job.CancelAsked)
	Job(id string) (Job, error)
	List(f Filter, limit, offset int) ([]Job, int, error) // newest first, and how many match
	After(f Filter, limit int, c Cursor) ([]Job, error)   // newest first, the jobs listed after c (keyset: no count, no skipped rows)
	ImagesOf(jobs []string) (map[string][]Image, error)   // the images of several jobs in one query, each in index order
	Unfinished() ([]Job, error)                           // queued or running, oldest first
	DeleteJob(id string) error                            // the job and its image records
	PutImage(img Image) error                             // idempotent: one record per id (SQLite replaces, PostgreSQL keeps the first; the bytes are the same)
	DeleteImage(id string) error                          // one image record (the store check's repair)
	Images(job string) ([]Image, error)                   // index order
	Image(id string) (Image, error)
	Ping() error
	Close() error
	Hosted // admission (quotas, idempotency) and retention: hosted.go
}

// Blobs stores image bytes under keys "JOB/INDEX.png". Put must be atomic: a reader sees no
// blob or the whole one.
type Blobs interface {
	Put(key string, data []byte) error
	Get(key string) ([]byte, error)
	Delete(key string) error                // one blob; ErrNotFound if there is none
	DeleteJob(job string) error             // every blob of the job
	Keys(each func(key string) error) error // every key, in no set order (the store check)
}

// Store is a Meta and a Blobs, kept consistent: a blob is written before its record (a crash
// in between leaves an orphan blob that a resumed job overwrites, never a record without bytes).
type Store struct {
	Meta
	Blobs Blobs
}

// New composes a store.
func New(meta Meta, blobs Blobs) *Store { return &Store{Meta: meta, Blobs: blobs} }

// Open opens (creating if needed) the embedded store under dir: dir/marspec.db and dir/images/.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data folder %s: %w", dir, err)
	}
	blobs, err := NewFiles(filepath.Join(dir, "images"))
	if err != nil {
		return nil, err
	}
	meta, err := OpenSQLite(filepath.Join(dir, "marspec.db"))
	if err != nil {
		return nil, err
	}
	return New(meta, blobs), nil
}

// ImageID is the id of image index of job.
func ImageID(job string, index int) string { return fmt.Sprintf("%s-%d", job, index) }

func blobKey(job string, index int) string { return fmt.Sprintf("%s/%d.png", job, index) }

// AddImage stores the PNG, then the record.
func (s *Store) AddImage(img Image, png []byte) error {
	if err := s.Blobs.Put(blobKey(img.JobID, img.Index), png); err != nil {
		return err
	}
	return s.PutImage(img)
}

// AddImageHeld stores the PNG, then the record, while h holds the job (q is this store's
// Meta as a Queue): a replica whose lease lapsed, or a run of an earlier attempt, writes
// neither (ok false). Ownership is checked before the object is written and again, in the
// same statement, with the record; a lease lost between the two leaves an object with the
// bytes the new owner writes anyway (images are deterministic), which the job's DELETE or
// the store check removes should the new owner never write its record.
func (s *Store) AddImageHeld(q Queue, h Hold, img Image, png []byte) (ok bool, err error) {
	if ok, err := q.Owns(h, img.JobID); err != nil || !ok {
		return false, err
	}
	if err := s.Blobs.Put(blobKey(img.JobID, img.Index), png); err != nil {
		return false, err
	}
	return q.PutImageOwned(h, img)
}

// ImagePNG returns the bytes of a stored image.
func (s *Store) ImagePNG(id string) ([]byte, error) {
	im, err := s.Image(id)
	if err != nil {
		return nil, err
	}
	data, err := s.Blobs.Get(blobKey(im.JobID, im.Index))
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", id, err)
	}
	return data, nil
}

// DeleteJob removes a job's blobs, then its record and image records: a failure on the way
// (the object store or the database down) leaves the record, so the caller's error is true
// and a retry finishes the removal; it never leaves blobs that no record leads to. A job
// without a record still has any blobs left under its id removed (ErrNotFound after): what
// a late writer or an earlier failure left behind goes with the next DELETE.
func (s *Store) DeleteJob(id string) error {
	if err := s.Blobs.DeleteJob(id); err != nil {
		return err
	}
	return s.Meta.DeleteJob(id)
}
