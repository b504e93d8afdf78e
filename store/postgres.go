package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"marspec/api"
)

// Postgres is a Meta that several replicas share, and their Queue (queue.go).
type Postgres struct {
	pool  *pgxpool.Pool
	aging atomic.Int64 // nanoseconds one priority level is worth when claiming (pgdeadline.go); 0: DefaultPriorityAging
}

// opTimeout bounds one statement: Meta has no context, and an unreachable database must fail
// the call (and so the job or the request, with the reason) rather than hang it.
const opTimeout = 10 * time.Second

// OpenPostgres connects to the database dsn (postgres://…), checks it answers and brings its
// schema up to date.
func OpenPostgres(dsn string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 8
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &Postgres{pool: pool}, nil
}

func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// Close closes the connections.
func (p *Postgres) Close() error { p.pool.Close(); return nil }

// Ping checks the database answers (readiness).
func (p *Postgres) Ping() error {
	ctx, cancel := opCtx()
	defer cancel()
	return dbErr(p.pool.Ping(ctx))
}

func (p *Postgres) exec(sql string, args ...any) (int64, error) {
	ctx, cancel := opCtx()
	defer cancel()
	tag, err := p.pool.Exec(ctx, sql, args...)
	return tag.RowsAffected(), dbErr(err)
}

// CreateJob stores a new job.
func (p *Postgres) CreateJob(j Job) error {
	ctx, cancel := opCtx()
	defer cancel()
	_, err := pgInsertJob(ctx, p.pool, j, "")
	return err
}

// pgInsertJob inserts j through the pool or a transaction, with an ON CONFLICT clause or
// none, and says how many rows it inserted (Admit: 0 when another job holds its
// Idempotency-Key).
func pgInsertJob(ctx context.Context, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, j Job, onConflict string) (int64, error) {
	req, err := json.Marshal(j.Request)
	if err != nil {
		return 0, err
	}
	set, err := json.Marshal(j.Settings)
	if err != nil {
		return 0, err
	}
	classes := j.Settings.Classes
	if classes == nil {
		classes = []int{}
	}
	tag, err := db.Exec(ctx, `INSERT INTO jobs (id, created, status, error, started, finished, mode, classes, request, settings, `+hostedCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`+onConflict, append([]any{j.ID, j.Created.UnixNano(), j.Status, j.Error, nanos(j.Started),
		nanos(j.Finished), j.Settings.Mode, classes, string(req), string(set)}, hostedArgs(j)...)...)
	return tag.RowsAffected(), dbErr(err)
}

// SetRunning marks a job running from at, keeping the first start.
func (p *Postgres) SetRunning(id string, at time.Time) error {
	_, err := p.exec(`UPDATE jobs SET status = $1, started = COALESCE(started, $2) WHERE id = $3 AND status IN ($4, $1)`,
		api.StatusRunning, at.UnixNano(), id, api.StatusQueued)
	return err
}

// Finish records a job's final status and reason (whoever owns it; see FinishOwned), at the
// database's clock (pgNow), not at.
func (p *Postgres) Finish(id, status, reason string, _ time.Time) error {
	_, err := p.exec(`UPDATE jobs SET status = $1, error = $2, finished = `+pgNow+`, owner = NULL, lease_until = NULL WHERE id = $3`,
		status, reason, id)
	return err
}

// pgNow is the database's clock in Unix nanoseconds: a job's end is stamped with it, and
// retention measured by it (Now), so a replica whose clock runs behind or ahead neither keeps
// a job too long nor has it swept before its expiry, as leases are timed by now() too.
const pgNow = `(extract(epoch FROM now()) * 1e9)::bigint`

// Now is the database's clock (Hosted).
func (p *Postgres) Now() (time.Time, error) {
	ctx, cancel := opCtx()
	defer cancel()
	var nanos int64
	err := p.pool.QueryRow(ctx, `SELECT `+pgNow).Scan(&nanos)
	return time.Unix(0, nanos).UTC(), dbErr(err)
}

// AskCancel records a cancellation request on an unfinished job (its owner acts on it; see
// Queue.Cancel, which also ends an unowned one).
func (p *Postgres) AskCancel(id string) error {
	_, err := p.exec(`UPDATE jobs SET cancel_requested = TRUE WHERE id = $1 AND status IN ('queued', 'running')`, id)
	return err
}

// Requeue puts a job back to queued, with no owner.
func (p *Postgres) Requeue(id string) error {
	_, err := p.exec(`UPDATE jobs SET status = $1, owner = NULL, lease_until = NULL WHERE id = $2`, api.StatusQueued, id)
	return err
}

const pgJobCols = `id, created, status, error, started, finished, request::text, settings::text, attempt, cancel_requested, ` + hostedCols

// scanPgJob decodes a job; extra receives columns selected after the job's.
func scanPgJob(row pgx.Row, extra ...any) (Job, error) {
	var j Job
	var created int64
	var started, finished *int64
	var req, set string
	if err := row.Scan(append(append([]any{&j.ID, &created, &j.Status, &j.Error, &started, &finished, &req, &set, &j.Attempt, &j.CancelAsked}, hostedDest(&j)...), extra...)...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return j, ErrNotFound
		}
		return j, dbErr(err)
	}
	j.Created = time.Unix(0, created).UTC()
	j.Started, j.Finished = fromNanos(started), fromNanos(finished)
	if err := json.Unmarshal([]byte(req), &j.Request); err != nil {
		return j, fmt.Errorf("job %s: stored request: %w", j.ID, err)
	}
	if err := json.Unmarshal([]byte(set), &j.Settings); err != nil {
		return j, fmt.Errorf("job %s: stored settings: %w", j.ID, err)
	}
	return j, nil
}

func fromNanos(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := time.Unix(0, *n).UTC()
	return &t
}

// Job returns one job.
func (p *Postgres) Job(id string) (Job, error) {
	ctx, cancel := opCtx()
	defer cancel()
	return scanPgJob(p.pool.QueryRow(ctx, `SELECT `+pgJobCols+` FROM jobs WHERE id = $1`, id))
}

// List returns a page of jobs, newest first, and how many match (a separate count, which an
// index-only scan answers; a window count(*) OVER () read every matching row whole).
func (p *Postgres) List(f Filter, limit, offset int) ([]Job, int, error) {
	cond, args := pgFilter(f)
	ctx, cancel := opCtx()
	defer cancel()
	var total int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE `+cond, args...).Scan(&total); err != nil {
		return nil, 0, dbErr(err)
	}
	n := len(args)
	jobs, err := p.jobs(fmt.Sprintf(`SELECT `+pgJobCols+` FROM jobs WHERE %s ORDER BY created DESC, id COLLATE "C" LIMIT $%d OFFSET $%d`,
		cond, n+1, n+2), append(args, limit, offset)...)
	return jobs, total, err
}

// After returns up to limit jobs listed after c, newest first: the index on (created DESC, id)
// reads from c on, and ties of created (rare) are put in id order by an incremental sort.
func (p *Postgres) After(f Filter, limit int, c Cursor) ([]Job, error) {
	sql, args := afterQuery(f, limit, c)
	return p.jobs(sql, args...)
}

func afterQuery(f Filter, limit int, c Cursor) (string, []any) {
	cond, args := pgFilter(f)
	n := len(args)
	return fmt.Sprintf(`SELECT `+pgJobCols+` FROM jobs WHERE %s AND created <= $%d AND (created < $%d OR id COLLATE "C" > $%d)
		ORDER BY created DESC, id COLLATE "C" LIMIT $%d`, cond, n+1, n+1, n+2, n+3), append(args, c.Created.UnixNano(), c.ID, limit)
}

// ImagesOf returns the images of several jobs in one query.
func (p *Postgres) ImagesOf(jobs []string) (map[string][]Image, error) {
	ctx, cancel := opCtx()
	defer cancel()
	rows, err := p.pool.Query(ctx, `SELECT `+pgImageCols+` FROM images WHERE job_id = ANY($1) ORDER BY job_id, idx`, jobs)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	imgs, err := collect(rows, func(r pgx.Rows) (Image, error) { return scanPgImage(r) })
	return imagesByJob(imgs), err
}

// pgFilter is the WHERE condition of a list filter and its arguments ($1…).
func pgFilter(f Filter) (string, []any) {
	cond, args := `TRUE`, []any{}
	if f.Class != nil {
		args = append(args, *f.Class)
		cond += fmt.Sprintf(` AND $%d = ANY(classes)`, len(args))
	}
	if f.Mode != "" {
		args = append(args, f.Mode)
		cond += fmt.Sprintf(` AND mode = $%d`, len(args))
	}
	if f.Status != "" {
		args = append(args, f.Status)
		cond += fmt.Sprintf(` AND status = $%d`, len(args))
	}
	cond, args = pgHostedFilter(f, cond, args)
	return cond, args
}

// Unfinished returns the jobs queued or running, oldest first.
func (p *Postgres) Unfinished() ([]Job, error) {
	return p.jobs(`SELECT `+pgJobCols+` FROM jobs WHERE status IN ($1, $2) ORDER BY created, id COLLATE "C"`,
		api.StatusQueued, api.StatusRunning)
}

func (p *Postgres) jobs(sql string, args ...any) ([]Job, error) {
	ctx, cancel := opCtx()
	defer cancel()
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	return collect(rows, func(r pgx.Rows) (Job, error) { return scanPgJob(r) })
}

// DeleteJob removes a job and (by the foreign key) its image records.
func (p *Postgres) DeleteJob(id string) error {
	n, err := p.exec(`DELETE FROM jobs WHERE id = $1`, id)
	if err == nil && n == 0 {
		return ErrNotFound
	}
	return err
}

// DeleteImage removes one image record.
func (p *Postgres) DeleteImage(id string) error {
	_, err := p.exec(`DELETE FROM images WHERE id = $1`, id)
	return err
}

// PutImage records an image once: a second put of the same id (a job resumed elsewhere made
// it again, with the same bytes) keeps the first record.
func (p *Postgres) PutImage(img Image) error {
	stats, err := statsJSON(img.Stats)
	if err != nil {
		return err
	}
	_, err = p.exec(`INSERT INTO images (id, job_id, idx, class, class_name, seconds, stats) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT DO NOTHING`, img.ID, img.JobID, img.Index, img.Class, img.ClassName, img.Seconds, stats)
	return err
}

// statsJSON is an image's statistics as stored (NULL when it has none).
func statsJSON(st *api.ImageStats) (any, error) {
	if st == nil {
		return nil, nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

const pgImageCols = `id, job_id, idx, class, class_name, seconds, stats::text`

func scanPgImage(row pgx.Row) (Image, error) {
	var im Image
	var stats *string
	if err := row.Scan(&im.ID, &im.JobID, &im.Index, &im.Class, &im.ClassName, &im.Seconds, &stats); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return im, ErrNotFound
		}
		return im, dbErr(err)
	}
	if stats != nil {
		if err := json.Unmarshal([]byte(*stats), &im.Stats); err != nil {
			return im, fmt.Errorf("image %s: stored statistics: %w", im.ID, err)
		}
	}
	return im, nil
}

// Images returns a job's image records in index order.
func (p *Postgres) Images(job string) ([]Image, error) {
	ctx, cancel := opCtx()
	defer cancel()
	rows, err := p.pool.Query(ctx, `SELECT `+pgImageCols+` FROM images WHERE job_id = $1 ORDER BY idx`, job)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	return collect(rows, func(r pgx.Rows) (Image, error) { return scanPgImage(r) })
}

// Image returns one image record.
func (p *Postgres) Image(id string) (Image, error) {
	ctx, cancel := opCtx()
	defer cancel()
	return scanPgImage(p.pool.QueryRow(ctx, `SELECT `+pgImageCols+` FROM images WHERE id = $1`, id))
}
