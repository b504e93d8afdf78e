package server

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"marspec/api"
	"marspec/store"
)

// Retention: a finished job is kept for its expires_in (the request's, else --retain), then
// deleted with its images. From its expiry on, clients get 404 for it, its images and its grid,
// and pages leave it out; the sweep removes it a grace period later, so that a download begun
// before the expiry finishes. The grace is --write-timeout, the longest any answer may take to
// write (the HTTP server cuts it then); beyond that, a replica never sweeps a job that one of
// its own requests is reading (tracked). One replica at a time sweeps (the store's sweep lease:
// a row on PostgreSQL, the one process on SQLite). Jobs queued or running are never swept, nor
// a job whose webhook calls are still pending (the store's Expired leaves it out): it goes once
// they are delivered or given up, so no pending call vanishes with its job.

// maxRetain bounds --retain and expires_in: ten years, far from a duration's overflow.
const maxRetain = 10 * 365 * 24 * time.Hour

// The sweep runs every sweepEvery and removes up to sweepBatch jobs a pass, a few passes a
// tick; the lease outlives two missed ticks, so a stopped sweeper's lease moves on quickly.
const (
	sweepEvery  = 10 * time.Second
	sweepBatch  = 100
	sweepPasses = 10
	sweepLease  = 3 * sweepEvery
)

// retention is the server's sweep and the reads it waits for.
type retention struct {
	s       *Server
	swept   prometheus.Counter
	mu      sync.Mutex
	readers map[string]int // job id -> its images or grid being read here
	// held, if set (tests), runs when a tracked read has been answered and before it stops
	// counting: a test holds a download open with it.
	held func(job string)
}

func newRetention(s *Server) *retention {
	r := &retention{s: s, readers: map[string]int{},
		swept: prometheus.NewCounter(prometheus.CounterOpts{Name: "marspec_jobs_swept_total",
			Help: "Finished jobs deleted with their images when their retention ended (by this replica)."})}
	s.metrics.reg.MustRegister(r.swept)
	return r
}

// sweepTick is one tick of the sweep (startBackground runs it every sweepEvery), at the
// store's clock: the one that stamped the jobs' ends, whichever replica ended them.
func (r *retention) sweepTick() {
	now, err := r.s.store.Now()
	if err == nil {
		_, err = r.sweep(now)
	}
	if err != nil {
		r.s.log.Warn("retention: sweep stopped; the next tick tries again", "err", detail(err))
	}
}

// SweepGrace is how long past its expiry a job stays in the store: every answer begun before
// the expiry has been written by then. The store check takes jobs for expired by it too.
func SweepGrace(cfg Config) time.Duration { return cfg.WriteTimeout }

func (r *retention) grace() time.Duration { return SweepGrace(r.s.cfg) }

// holder names this replica to the sweep lease.
func (r *retention) holder() string {
	if r.s.rep != nil {
		return r.s.rep.id
	}
	return "single"
}

// sweep removes the jobs expired a grace period before now, with their images (objects
// first, then the records: a failure between leaves the record, and the next pass finishes),
// if this replica holds the sweep lease; it returns how many it removed.
func (r *retention) sweep(now time.Time) (int, error) {
	ok, err := r.s.store.SweepLease(r.holder(), sweepLease)
	if err != nil || !ok {
		return 0, err
	}
	removed := 0
	for range sweepPasses {
		jobs, err := r.s.store.Expired(store.SweepCut(now, r.grace()), sweepBatch)
		if err != nil {
			return removed, err
		}
		skipped := 0
		for _, j := range jobs {
			if j.Status == api.StatusQueued || j.Status == api.StatusRunning || r.reading(j.ID) {
				skipped++ // read here right now: the next pass takes it
				continue
			}
			if err := r.s.store.DeleteJob(j.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return removed, err
			}
			removed++
			r.swept.Inc()
		}
		if len(jobs) < sweepBatch || skipped == len(jobs) {
			break
		}
	}
	return removed, nil
}

// tracked counts a read of a job's images (an image or its grid) while it is answered, so
// that this replica's sweep leaves the job alone meanwhile.
func (r *retention) tracked(c *gin.Context) {
	id := c.Param("id")
	if id == "" { // /v1/images/JOBID-INDEX.png
		file := strings.TrimSuffix(c.Param("file"), ".png")
		if i := strings.LastIndex(file, "-"); i > 0 {
			id = file[:i]
		}
	}
	r.mu.Lock()
	r.readers[id]++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.readers[id]--; r.readers[id] <= 0 {
			delete(r.readers, id)
		}
		r.mu.Unlock()
	}()
	c.Next()
	if r.held != nil {
		r.held(id)
	}
}

func (r *retention) reading(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readers[id] > 0
}

// wireRetention adds a job's owner and expiry to its wire form.
func wireRetention(g *api.Generation, j store.Job) {
	g.Key, g.ExpiresAt = j.Key, j.ExpiresAt()
	if j.Retain > 0 {
		g.ExpiresIn = int64(j.Retain / time.Second)
	}
}
