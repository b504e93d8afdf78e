package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"marspec/api"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SQLite is a Meta in one embedded database file.
type SQLite struct{ db *sql.DB }

const schema = `
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, created INTEGER NOT NULL, status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
  started INTEGER, finished INTEGER, mode TEXT NOT NULL, classes TEXT NOT NULL,
  request TEXT NOT NULL, settings TEXT NOT NULL, cancel_requested INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created DESC);
CREATE TABLE IF NOT EXISTS images (
  id TEXT PRIMARY KEY, job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
  class INTEGER NOT NULL, class_name TEXT NOT NULL, seconds REAL NOT NULL, stats TEXT);
CREATE INDEX IF NOT EXISTS images_job ON images(job_id, idx);`

// OpenSQLite opens (creating if needed) the database file at path.
func OpenSQLite(path string) (*SQLite, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises writes anyway, this avoids SQLITE_BUSY
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	// a database made before cancel_requested existed gets the column
	var has int
	err = db.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = 'cancel_requested'`).Scan(&has)
	if err == nil && has == 0 {
		_, err = db.Exec(`ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0`)
	}
	if err == nil {
		err = addHostedColumns(db)
	}
	if err == nil {
		err = addWebhookOutbox(db)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	return &SQLite{db: db}, nil
}

// Close closes the database.
func (s *SQLite) Close() error { return s.db.Close() }

// Ping checks the database answers (readiness).
func (s *SQLite) Ping() error { return dbErr(s.db.Ping()) }

func nanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

// classList is ",1,12," so that a LIKE '%,1,%' filter matches class 1 and not 12.
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
func (s *SQLite) CreateJob(j Job) error { return sqliteInsertJob(s.db, j) }

// sqliteInsertJob inserts j through db or a transaction (Admit).
func sqliteInsertJob(db interface {
	Exec(query string, args ...any) (sql.Result, error)
}, j Job) error {
	req, err := json.Marshal(j.Request)
	if err != nil {
		return err
	}
	set, err := json.Marshal(j.Settings)
	if err != nil {
		return err
	}
	_, err = db.Exec(`INSERT INTO jobs (id, created, status, error, started, finished, mode, classes, request, settings, `+hostedCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append([]any{j.ID, j.Created.UnixNano(), j.Status, j.Error, nanos(j.Started), nanos(j.Finished),
		j.Settings.Mode, classList(j.Settings.Classes), string(req), string(set)}, hostedArgs(j)...)...)
	return dbErr(err)
}

// SetRunning marks a job running from at.
func (s *SQLite) SetRunning(id string, at time.Time) error {
	_, err := s.db.Exec(`UPDATE jobs SET status = ?, started = COALESCE(started, ?) WHERE id = ? AND status IN (?, ?)`,
		api.StatusRunning, at.UnixNano(), id, api.StatusQueued, api.StatusRunning)
	return dbErr(err)
}

// Finish records a job's final status and reason.
func (s *SQLite) Finish(id, status, reason string, at time.Time) error {
	_, err := s.db.Exec(`UPDATE jobs SET status = ?, error = ?, finished = ? WHERE id = ?`, status, reason, at.UnixNano(), id)
	return dbErr(err)
}

// AskCancel records a cancellation request on an unfinished job.
func (s *SQLite) AskCancel(id string) error {
	_, err := s.db.Exec(`UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND status IN (?, ?)`, id, api.StatusQueued, api.StatusRunning)
	return dbErr(err)
}

// Requeue puts an interrupted job back to queued (on start, before resuming it).
func (s *SQLite) Requeue(id string) error {
	_, err := s.db.Exec(`UPDATE jobs SET status = ? WHERE id = ?`, api.StatusQueued, id)
	return dbErr(err)
}

const jobCols = `id, created, status, error, started, finished, request, settings, cancel_requested, ` + hostedCols

func scanJob(row interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var created int64
	var started, finished sql.NullInt64
	var req, set string
	if err := row.Scan(append([]any{&j.ID, &created, &j.Status, &j.Error, &started, &finished, &req, &set, &j.CancelAsked}, hostedDest(&j)...)...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return j, ErrNotFound
		}
		return j, dbErr(err)
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
func (s *SQLite) Job(id string) (Job, error) {
	return scanJob(s.db.QueryRow(`SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
}

// List returns a page of jobs, newest first, and how many match.
func (s *SQLite) List(f Filter, limit, offset int) ([]Job, int, error) {
	cond, args := sqliteFilter(f)
	var total int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM jobs WHERE `+cond, args...).Scan(&total); err != nil {
		return nil, 0, dbErr(err)
	}
	jobs, err := s.jobs(`SELECT `+jobCols+` FROM jobs WHERE `+cond+` ORDER BY created DESC, id LIMIT ? OFFSET ?`,
		append(args, limit, offset)...)
	return jobs, total, err
}

// After returns up to limit jobs listed after c, newest first.
func (s *SQLite) After(f Filter, limit int, c Cursor) ([]Job, error) {
	cond, args := sqliteFilter(f)
	return s.jobs(`SELECT `+jobCols+` FROM jobs WHERE `+cond+` AND created <= ? AND (created < ? OR id > ?) ORDER BY created DESC, id LIMIT ?`,
		append(args, c.Created.UnixNano(), c.Created.UnixNano(), c.ID, limit)...)
}

// ImagesOf returns the images of several jobs in one query.
func (s *SQLite) ImagesOf(jobs []string) (map[string][]Image, error) {
	if len(jobs) == 0 {
		return map[string][]Image{}, nil
	}
	args := make([]any, len(jobs))
	for i, id := range jobs {
		args[i] = id
	}
	rows, err := s.db.Query(`SELECT `+imageCols+` FROM images WHERE job_id IN (?`+strings.Repeat(",?", len(jobs)-1)+`) ORDER BY job_id, idx`, args...)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	imgs, err := collect(rows, func(r *sql.Rows) (Image, error) { return scanImage(r) })
	return imagesByJob(imgs), err
}

// sqliteFilter is the WHERE condition of a list filter and its arguments.
func sqliteFilter(f Filter) (string, []any) {
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
	where, args = sqliteHostedFilter(f, where, args)
	return strings.Join(where, " AND "), args
}

// Unfinished returns the jobs left queued or running (by a crash or a shutdown), oldest first.
func (s *SQLite) Unfinished() ([]Job, error) {
	return s.jobs(`SELECT `+jobCols+` FROM jobs WHERE status IN (?, ?) ORDER BY created`, api.StatusQueued, api.StatusRunning)
}

func (s *SQLite) jobs(query string, args ...any) ([]Job, error) {
	rows, err := s.db.Query(query, args...)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	return collect(rows, func(r *sql.Rows) (Job, error) { return scanJob(r) })
}

// DeleteJob removes a job and its image records.
func (s *SQLite) DeleteJob(id string) error {
	res, err := s.db.Exec(`DELETE FROM jobs WHERE id = ?`, id)
	if err != nil {
		return dbErr(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	_, err = s.db.Exec(`DELETE FROM images WHERE job_id = ?`, id) // also without foreign-key support
	return dbErr(err)
}

// DeleteImage removes one image record.
func (s *SQLite) DeleteImage(id string) error {
	_, err := s.db.Exec(`DELETE FROM images WHERE id = ?`, id)
	return dbErr(err)
}

// PutImage records an image (replacing a record of the same id: a resumed job remade it).
func (s *SQLite) PutImage(img Image) error {
	var stats any
	if img.Stats != nil {
		b, err := json.Marshal(img.Stats)
		if err != nil {
			return err
		}
		stats = string(b)
	}
	_, err := s.db.Exec(`INSERT OR REPLACE INTO images (id, job_id, idx, class, class_name, seconds, stats) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		img.ID, img.JobID, img.Index, img.Class, img.ClassName, img.Seconds, stats)
	return dbErr(err)
}

const imageCols = `id, job_id, idx, class, class_name, seconds, stats`

func scanImage(row interface{ Scan(...any) error }) (Image, error) {
	var im Image
	var stats sql.NullString
	if err := row.Scan(&im.ID, &im.JobID, &im.Index, &im.Class, &im.ClassName, &im.Seconds, &stats); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return im, ErrNotFound
		}
		return im, dbErr(err)
	}
	if stats.Valid {
		if err := json.Unmarshal([]byte(stats.String), &im.Stats); err != nil {
			return im, fmt.Errorf("image %s: stored statistics: %w", im.ID, err)
		}
	}
	return im, nil
}

// Images returns a job's image records in index order.
func (s *SQLite) Images(job string) ([]Image, error) {
	rows, err := s.db.Query(`SELECT `+imageCols+` FROM images WHERE job_id = ? ORDER BY idx`, job)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	return collect(rows, func(r *sql.Rows) (Image, error) { return scanImage(r) })
}

// Image returns one image record.
func (s *SQLite) Image(id string) (Image, error) {
	return scanImage(s.db.QueryRow(`SELECT `+imageCols+` FROM images WHERE id = ?`, id))
}
