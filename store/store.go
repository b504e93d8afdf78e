// Package store keeps jobs, images and their statistics in an embedded SQLite database
// (modernc.org/sqlite: pure Go, no cgo) and the PNG files under the data folder, each written
// atomically (a temporary file renamed into place), so a crash never leaves half an image.
package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"marspec/api"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrNotFound is returned for unknown job or image ids.
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
}

// Image is a stored image (its PNG is a file).
type Image struct {
	ID        string
	JobID     string
	Index     int
	Class     int
	ClassName string
	Seconds   float64
	Stats     *api.ImageStats
}

// Store is the database and the image folder. Safe for concurrent use.
type Store struct {
	db  *sql.DB
	dir string
}

const schema = `
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, created INTEGER NOT NULL, status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
  started INTEGER, finished INTEGER, mode TEXT NOT NULL, classes TEXT NOT NULL,
  request TEXT NOT NULL, settings TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created DESC);
CREATE TABLE IF NOT EXISTS images (
  id TEXT PRIMARY KEY, job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
  class INTEGER NOT NULL, class_name TEXT NOT NULL, seconds REAL NOT NULL, stats TEXT);
CREATE INDEX IF NOT EXISTS images_job ON images(job_id, idx);`

// Open opens (creating if needed) the store under dir: dir/marspec.db and dir/images/.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		return nil, fmt.Errorf("data folder %s: %w", dir, err)
	}
	dsn := "file:" + filepath.Join(dir, "marspec.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises writes anyway, this avoids SQLITE_BUSY
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s: %w", dir, err)
	}
	return &Store{db: db, dir: dir}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks the database answers (readiness).
func (s *Store) Ping() error { return s.db.Ping() }

func nanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

func classList(classes []int) string {
	var b strings.Builder
	b.WriteByte(',')
	for _, c := range classes {
		b.WriteString(strconv.Itoa(c))
		b.WriteByte(',')
	}
	return b.String()
}

// CreateJob stores a new job.
func (s *Store) CreateJob(j Job) error {
	req, err := json.Marshal(j.Request)
	if err != nil {
		return err
	}
	set, err := json.Marshal(j.Settings)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(`INSERT INTO jobs (id, created, status, error, started, finished, mode, classes, request, settings)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, j.ID, j.Created.UnixNano(), j.Status, j.Error, nanos(j.Started), nanos(j.Finished),
		j.Settings.Mode, classList(j.Settings.Classes), string(req), string(set))
	return err
}

// SetRunning marks a job running from at.
func (s *Store) SetRunning(id string, at time.Time) error {
	_, err := s.db.Exec(`UPDATE jobs SET status = ?, started = COALESCE(started, ?) WHERE id = ? AND status IN (?, ?)`,
		api.StatusRunning, at.UnixNano(), id, api.StatusQueued, api.StatusRunning)
	return err
}

// Finish records a job's final status and reason.
func (s *Store) Finish(id, status, reason string, at time.Time) error {
	_, err := s.db.Exec(`UPDATE jobs SET status = ?, error = ?, finished = ? WHERE id = ?`, status, reason, at.UnixNano(), id)
	return err
}

// Requeue puts an interrupted job back to queued (on start, before resuming it).
func (s *Store) Requeue(id string) error {
	_, err := s.db.Exec(`UPDATE jobs SET status = ? WHERE id = ?`, api.StatusQueued, id)
	return err
}

const jobCols = `id, created, status, error, started, finished, request, settings`

func scanJob(row interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var created int64
	var started, finished sql.NullInt64
	var req, set string
	if err := row.Scan(&j.ID, &created, &j.Status, &j.Error, &started, &finished, &req, &set); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return j, ErrNotFound
		}
		return j, err
	}
	j.Created = time.Unix(0, created).UTC()
	if started.Valid {
		t := time.Unix(0, started.Int64).UTC()
		j.Started = &t
	}
	if finished.Valid {
		t := time.Unix(0, finished.Int64).UTC()
		j.Finished = &t
	}
	if err := json.Unmarshal([]byte(req), &j.Request); err != nil {
		return j, fmt.Errorf("job %s: stored request: %w", j.ID, err)
	}
	if err := json.Unmarshal([]byte(set), &j.Settings); err != nil {
		return j, fmt.Errorf("job %s: stored settings: %w", j.ID, err)
	}
	return j, nil
}

// Job returns one job.
func (s *Store) Job(id string) (Job, error) {
	return scanJob(s.db.QueryRow(`SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
}

// Filter selects jobs to list; zero values select everything.
type Filter struct {
	Class  *int
	Mode   string
	Status string
}

// List returns a page of jobs, newest first, and how many match.
func (s *Store) List(f Filter, limit, offset int) ([]Job, int, error) {
	where, args := []string{"1=1"}, []any{}
	if f.Class != nil {
		where, args = append(where, "classes LIKE ?"), append(args, "%,"+strconv.Itoa(*f.Class)+",%")
	}
	if f.Mode != "" {
		where, args = append(where, "mode = ?"), append(args, f.Mode)
	}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	cond := strings.Join(where, " AND ")
	var total int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM jobs WHERE `+cond, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := s.db.Query(`SELECT `+jobCols+` FROM jobs WHERE `+cond+` ORDER BY created DESC, id LIMIT ? OFFSET ?`,
		append(args, limit, offset)...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, j)
	}
	return out, total, rows.Err()
}

// Unfinished returns the jobs left queued or running (by a crash or a shutdown), oldest first.
func (s *Store) Unfinished() ([]Job, error) {
	rows, err := s.db.Query(`SELECT `+jobCols+` FROM jobs WHERE status IN (?, ?) ORDER BY created`, api.StatusQueued, api.StatusRunning)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// DeleteJob removes a finished job, its images and their files.
func (s *Store) DeleteJob(id string) error {
	res, err := s.db.Exec(`DELETE FROM jobs WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	if _, err := s.db.Exec(`DELETE FROM images WHERE job_id = ?`, id); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(s.dir, "images", id))
}
