package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"marspec/api"
	"marspec/store"
)

// replica is what a server runs when its store is shared with other replicas (store.Queue,
// PostgreSQL): it claims jobs from the shared queue while its scheduler has room, renews the
// lease on the jobs it owns, and carries events and cancellations between replicas over the
// store's notifications. Without it (SQLite) the server keeps the jobs it accepts.
type replica struct {
	s     *Server
	q     store.Queue
	id    string
	lease time.Duration
	wake  chan struct{}
	out   chan message // to other replicas, in order, sent by one goroutine
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	mu       sync.Mutex
	lastSent map[string]time.Time // per job, when its last progress message went out
}

// Intervals of the shared queue. A killed replica's jobs are claimed by another within
// lease + pollEvery; a running job's events reach other replicas by notification (well under
// a millisecond on loopback) with at most one progress message per job per progressEvery.
const (
	pollEvery     = time.Second // claim check and watched-job check when no notification comes
	progressEvery = 100 * time.Millisecond
)

func newReplica(s *Server, q store.Queue, lease time.Duration) *replica {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ctx, stop := context.WithCancel(context.Background())
	return &replica{s: s, q: q, id: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b)), lease: lease,
		wake: make(chan struct{}, 1), out: make(chan message, 4096), ctx: ctx, stop: stop, lastSent: map[string]time.Time{}}
}

// start runs the claim, watch, renewal, listening and sending goroutines until halt.
func (r *replica) start() {
	r.wg.Add(5)
	go func() { defer r.wg.Done(); r.every(r.wake, r.claim) }()
	// watched jobs a missed notification left open are ended apart from the claim loop: a
	// database slow to answer these reads delays no claim
	go func() { defer r.wg.Done(); r.every(nil, r.s.hub.checkWatched) }()
	go func() { defer r.wg.Done(); r.renewLoop() }()
	go func() { defer r.wg.Done(); r.q.Listen(r.ctx, r.receive, r.listening) }()
	go func() { defer r.wg.Done(); r.sendLoop() }()
	r.poke()
}

// giveBack returns the jobs this replica still holds to the queue and wakes the others to
// claim them now rather than after the lease (a clean shutdown).
func (r *replica) giveBack() {
	held := r.s.hub.held()
	if len(held) == 0 {
		return
	}
	if err := r.q.Release(r.id, held); err != nil {
		r.s.log.Error("shutdown: giving jobs back to the shared queue", "err", err)
		return
	}
	if err := r.q.Notify(encode(message{Kind: "queued"})); err != nil {
		r.s.log.Warn("shutdown: telling the other replicas", "err", err)
	}
	r.s.log.Info("shutdown: jobs given back to the shared queue", "jobs", len(held))
}

// halt stops the goroutines without giving jobs back (a shutdown releases them first),
// waiting for them until ctx ends (one may be in a store call that the database holds up).
func (r *replica) halt(ctx context.Context) error {
	r.stop()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("replica goroutines still in store calls at the shutdown deadline: %w", ctx.Err())
	}
}

func (r *replica) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// every runs do on each poll tick and each wake (nil: ticks only) until the replica stops.
func (r *replica) every(wake <-chan struct{}, do func()) {
	tickUntilDone(r.ctx, pollEvery, wake, do)
}

// claim takes jobs while the scheduler has fewer images to make than one batch holds, so an
// idle replica takes work a busy one would only queue.
func (r *replica) claim() {
	s := r.s
	for !s.stopping.Load() && r.ctx.Err() == nil && s.sched.Backlog() < s.cfg.MaxBatch {
		j, ok, err := r.q.Claim(r.id, r.lease, cancelReason)
		if err != nil {
			s.log.Error("shared queue: claim", "err", err)
			return
		}
		if !ok {
			return
		}
		if s.sched.Has(j.ID) {
			if s.hub.adopt(j.ID, j.Attempt) {
				continue // still running here after this replica's own lease ran out: it goes on as the new attempt
			}
			// A run here is being stopped (its claim was lost): give the new claim back and
			// claim it again once that run has ended, rather than let it end the job.
			if rerr := r.q.Release(r.id, map[string]int{j.ID: j.Attempt}); rerr != nil {
				s.log.Error("store: giving back a claimed job", "id", j.ID, "err", rerr)
			}
			return
		}
		err = s.readmit(j, false)
		var never notRunnable
		switch {
		case err == nil:
		case errors.As(err, &never):
			reason := "not run: " + err.Error()
			s.log.Warn("claimed job not runnable", "id", j.ID, "reason", reason)
			if _, ferr := r.q.FinishOwned(store.Hold{Owner: r.id, Attempt: j.Attempt}, j.ID, api.StatusFailed, reason, time.Now()); ferr != nil {
				s.log.Error("store: failing claimed job", "id", j.ID, "err", ferr)
			}
			r.send(message{Kind: "done", Job: j.ID})
		default: // the store or the scheduler, for now: give it back for a later claim
			s.log.Warn("claimed job given back", "id", j.ID, "err", err)
			if rerr := r.q.Release(r.id, map[string]int{j.ID: j.Attempt}); rerr != nil {
				s.log.Error("store: giving back a claimed job", "id", j.ID, "err", rerr)
			}
			return
		}
	}
}

// renewLoop renews the lease on the jobs this replica runs three times per lease, and stops
// those it lost or whose cancellation was asked (a missed notification).
func (r *replica) renewLoop() {
	tick := time.NewTicker(r.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
		held, began := r.s.hub.held(), time.Now()
		lost, cancel, err := r.q.Renew(r.id, held, r.lease)
		if err != nil {
			r.s.log.Error("shared queue: renewing leases", "err", detail(err))
			continue
		}
		for _, id := range lost {
			delete(held, id)
		}
		r.s.hub.renewed(slices.Collect(maps.Keys(held)), began.Add(r.lease-r.lease/10))
		for _, id := range lost {
			if !r.s.sched.Has(id) || !r.s.hub.markLost(id) {
				continue // it ended here while the renewal ran: its end was recorded, nothing was lost
			}
			r.s.log.Warn("lease lost: the job is another attempt's now", "id", id)
			r.s.sched.Cancel(id) // the run writes nothing more, its end included
		}
		for _, id := range cancel {
			r.cancelLocal(id)
		}
	}
}

func (r *replica) cancelLocal(id string) {
	if _, live := r.s.hub.markCancel(id); live {
		r.s.sched.Cancel(id)
	}
}

// watcherPatience is how long an event stream's last read waits out a shared store's outage.
// The read holds no claim, so no lease bounds it, and its client waits for exactly this
// answer: half a short lease (the bound it had) was less than a cut pool's reconnection on a
// loaded machine, and the stream closed without its "done".
const watcherPatience = 30 * time.Second

// readForWatcher runs a read for a client that waits on it (an event stream's final state):
// with a shared store it is retried through an outage up to watcherPatience, or until the
// client leaves or the server stops.
func (s *Server) readForWatcher(ctx context.Context, call func() error) error {
	if s.rep == nil {
		return call()
	}
	deadline := time.Now().Add(watcherPatience)
	mayWait := func(d time.Duration) bool {
		return !time.Now().Add(d).After(deadline) && ctx.Err() == nil && s.rep.ctx.Err() == nil
	}
	return s.untilAvailable(call, mayWait, time.Second, "reading a job's final state for its event stream failed; retrying")
}
