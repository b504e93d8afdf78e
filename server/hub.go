package server

import (
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"marspec/api"
	"marspec/generation"
	"marspec/scheduler"
	"marspec/store"
)

// hub is the live side of jobs: the plan and progress of every queued or running job, and the
// event streams watching them. It is the scheduler's Sink: it stores images and final states.
type hub struct {
	s    *Server
	mu   sync.Mutex
	live map[string]*liveJob
	// watched are the jobs event streams follow when the store is shared: fed by the
	// replicas' notifications (this one's included), whichever replica runs the job.
	watched map[string]*liveJob
}

type liveJob struct {
	plan     generation.Plan
	progress api.Progress
	subs     map[chan api.Event]struct{}
	done     chan struct{}
	cancel   bool // a DELETE asked to cancel it
	attempt  int  // the shared queue's attempt this run writes as (store.Hold)
	lost     bool // its claim was lost: the run is being stopped, and writes nothing
	// heldUntil is when the claim runs out unless renewed, by this replica's clock: the
	// start of the last successful claim or renewal plus the lease, less a margin.
	heldUntil time.Time
	// created (the job's submission) and started (this run told the store it runs) give the
	// job's latency at its end without reading the job back, a round trip with a shared store
	// that the end's waiters would wait for
	created time.Time
	started bool
}

func newHub(s *Server) *hub {
	return &hub{s: s, live: map[string]*liveJob{}, watched: map[string]*liveJob{}}
}

// track registers a job before it is submitted (imagesDone: already stored, when resumed;
// attempt: of the shared queue's claim, 0 without one; created: when it was submitted).
func (h *hub) track(id string, plan generation.Plan, imagesDone, attempt int, created time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := plan.Images()
	var until time.Time
	if h.s.rep != nil {
		until = time.Now().Add(h.s.rep.lease - h.s.rep.lease/5) // the claim began a moment ago
	}
	h.live[id] = &liveJob{plan: plan, subs: map[chan api.Event]struct{}{}, done: make(chan struct{}), attempt: attempt, heldUntil: until, created: created,
		progress: api.Progress{ImagesDone: imagesDone, ImagesTotal: total, TokensDone: imagesDone * plan.SeqLen,
			TokensTotal: total * plan.SeqLen, Fraction: float64(imagesDone) / float64(max(1, total))}}
}

// forget drops a job that was refused by the scheduler.
func (h *hub) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.live, id)
}

func (h *hub) get(id string) (*liveJob, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.live[id]
	return j, ok
}

// progress returns a live job's progress.
func (h *hub) progress(id string) (api.Progress, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if j, ok := h.live[id]; ok {
		return j.progress, true
	}
	if w, ok := h.watched[id]; ok && w.progress.ImagesTotal > 0 {
		return w.progress, true
	}
	return api.Progress{}, false
}

// unmarkCancel takes back a cancellation request that could not be recorded.
func (h *hub) unmarkCancel(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if j, ok := h.live[id]; ok {
		j.cancel = false
	}
}

// cancelAsked reports whether a DELETE asked to cancel a live job.
func (h *hub) cancelAsked(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.live[id]
	return ok && j.cancel
}

// markCancel records a cancellation request and reports whether one was already made.
func (h *hub) markCancel(id string) (already, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.live[id]
	if !ok {
		return false, false
	}
	already, j.cancel = j.cancel, true
	return already, true
}

// subscribe returns a channel of the job's events and the job's done channel; nil when the
// job is not live. With a shared store every job may be running somewhere: the stream
// follows it through the watched jobs (the caller checks the stored state after subscribing).
func (h *hub) subscribe(id string) (chan api.Event, chan struct{}, func()) {
	if h.s.rep != nil {
		return h.watch(id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.live[id]
	if !ok {
		return nil, nil, func() {}
	}
	ch := make(chan api.Event, 64)
	j.subs[ch] = struct{}{}
	return ch, j.done, func() {
		h.mu.Lock()
		delete(j.subs, ch)
		h.mu.Unlock()
	}
}

// publish sends ev to every subscriber; a subscriber more than 64 events behind misses
// events (a later progress event supersedes a missed one, and the final "done" event, sent
// from the done channel, lists every image), never the end of the job.
func (h *hub) publish(j *liveJob, ev api.Event) {
	for ch := range j.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// Started records the start, waiting out a store outage (persist) as the run's other writes
// do: written once, a start refused during an outage left the job "queued" until its end. It
// runs on the worker's goroutine after the scheduler's lock is released (scheduler.worker.tell).
func (h *hub) Started(id string, at time.Time) {
	if err := h.s.persist(id, func() error { return h.setRunning(id, at) }); err != nil {
		h.s.log.Error("store: job running", "id", id, "err", detail(err))
	}
	h.mu.Lock()
	if j, ok := h.live[id]; ok {
		j.started = true
	}
	h.mu.Unlock()
	h.s.hooks.poke() // its "started" webhook, if it asked for one
}

// setRunning marks the job running: with a shared store only while this run holds it (a lost
// claim is no error here: the renewal that found it stops the run).
func (h *hub) setRunning(id string, at time.Time) error {
	if h.s.rep == nil {
		return h.s.store.SetRunning(id, at)
	}
	hold, ok := h.hold(id)
	if !ok {
		return nil
	}
	_, err := h.s.rep.q.SetRunningOwned(hold, id, at)
	return err
}

// hold is the claim a live job's run writes as (this replica, the attempt it was claimed in).
func (h *hub) hold(id string) (store.Hold, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.live[id]
	if !ok || j.lost {
		return store.Hold{}, false
	}
	return store.Hold{Owner: h.s.rep.id, Attempt: j.attempt}, true
}

func (h *hub) Progress(id string, p api.Progress) {
	h.mu.Lock()
	j, ok := h.live[id]
	if ok {
		j.progress = p
		h.publish(j, api.Event{Type: "progress", Progress: &p})
	}
	h.mu.Unlock()
	if ok && h.s.rep != nil {
		h.s.rep.publish(id, api.Event{Type: "progress", Progress: &p})
	}
}

// sharedWriters is how many images of a step a replica writes side by side. With a shared
// store (PostgreSQL and S3, on other machines) an image's writes are mostly waits: round trips
// and a commit. Four leaves PostgreSQL's pool (eight connections) room for claims, renewals
// and readers. The embedded store writes one at a time: its writes are local work, and side by
// side they took CPU from the engine (docs/BENCHMARKS.md, "A store on other machines").
const sharedWriters = 4

// writers is how many images of a step are written side by side.
func (h *hub) writers() int {
	if h.s.rep != nil {
		return sharedWriters
	}
	return 1
}

// Images stores a step's finished images, each encoded with its provenance (side by side with
// a shared store: writers), before the scheduler goes on; then counts and announces the stored
// ones in the batch's order, so event streams see a job's images in index order.
func (h *hub) Images(batch []scheduler.JobImage) []error {
	errs := make([]error, len(batch))
	stored := make([]storedImage, len(batch))
	var g errgroup.Group
	g.SetLimit(h.writers())
	for i, b := range batch {
		g.Go(func() error {
			stored[i], errs[i] = h.storeImage(b.Job, b.Image)
			return nil
		})
	}
	_ = g.Wait() // each image's error is in errs
	for i, b := range batch {
		if errs[i] == nil {
			h.announce(b.Job, b.Image, stored[i])
		}
	}
	return errs
}

// storedImage is an image written, with the job it was written for.
type storedImage struct {
	job *liveJob
	rec store.Image
}

// storeImage encodes the PNG with its provenance and stores it with its record.
func (h *hub) storeImage(id string, img generation.Image) (storedImage, error) {
	j, ok := h.get(id)
	if !ok {
		return storedImage{}, errors.New("job is not tracked")
	}
	png, err := j.plan.PNG(img)
	if err != nil {
		return storedImage{}, err
	}
	rec := store.Image{ID: store.ImageID(id, img.Index), JobID: id, Index: img.Index, Class: img.Class,
		ClassName: j.plan.ClassNames[img.Index], Seconds: img.Seconds, Stats: j.plan.WireStats(img)}
	return storedImage{j, rec}, h.s.persist(id, func() error { return h.store(id, rec, png) })
}

// announce counts a stored image and sends its event to the job's streams, here and on the
// other replicas.
func (h *hub) announce(id string, img generation.Image, stored storedImage) {
	j := stored.job
	m := h.s.metrics
	m.images.WithLabelValues(j.plan.Mode).Inc()
	if img.Spec != nil && img.Spec.Drafted > 0 {
		m.alpha.Observe(img.Spec.Alpha())
	}
	if h.s.afterImage != nil {
		h.s.afterImage(id, img.Index)
	}
	wire := wireImage(stored.rec)
	h.mu.Lock()
	h.publish(j, api.Event{Type: "image", Image: &wire})
	h.mu.Unlock()
	if h.s.rep != nil {
		h.s.rep.publish(id, api.Event{Type: "image", Image: &wire})
	}
}

// errNotHeld ends a run whose claim on the job was lost: another attempt owns it now.
var errNotHeld = errors.New("the job's claim was lost: another attempt owns it")

// store writes an image: with a shared store only while this run holds the job.
func (h *hub) store(id string, rec store.Image, png []byte) error {
	if h.s.rep == nil {
		return h.s.store.AddImage(rec, png)
	}
	hold, ok := h.hold(id)
	if ok {
		ok, err := h.s.store.AddImageHeld(h.s.rep.q, hold, rec, png)
		if err != nil || ok {
			return err
		}
	}
	return errNotHeld
}

// Finished stores the final state, then wakes waiters and event streams. A run interrupted
// by a store outage stores none: the job stays unfinished, to run again (persist.go).
func (h *hub) Finished(id string, err error) {
	if !interrupted(err) && h.cancelAsked(id) {
		err = scheduler.ErrCancelled // a DELETE was answered 202 "it ends cancelled": it does, even if it finished meanwhile
	}
	status, reason := api.StatusSucceeded, ""
	switch {
	case errors.Is(err, scheduler.ErrCancelled):
		status, reason = api.StatusCancelled, cancelReason
	case errors.Is(err, scheduler.ErrQueueDeadline):
		status, reason = api.StatusFailed, store.QueueDeadlineReason
		h.s.log.Info("job failed: not started before its queue deadline", "id", id)
	case interrupted(err):
		status = ""
		h.s.log.Warn("job interrupted by a store outage; it runs again when the store is back", "id", id, "err", detail(err))
	case err != nil:
		status, reason = api.StatusFailed, err.Error()
		h.s.log.Error("job failed", "id", id, "err", detail(err))
	}
	now := time.Now()
	recorded, serr := false, error(nil)
	if status != "" {
		recorded, serr = h.finish(id, status, reason, now)
	}
	if serr != nil {
		h.s.log.Error("store: job finished", "id", id, "err", detail(serr))
	}
	h.s.hooks.poke()
	if h.s.rep != nil {
		defer h.s.rep.ended(id, recorded)
	}
	h.mu.Lock()
	j, ok := h.live[id]
	started := ok && j.started
	delete(h.live, id)
	h.mu.Unlock()
	if recorded { // counted by the replica that recorded the end: summed across replicas, once per job
		h.s.metrics.jobs.WithLabelValues(status).Inc()
	}
	if !ok {
		return
	}
	if started {
		h.s.metrics.latency.WithLabelValues(j.plan.Mode).Observe(now.Sub(j.created).Seconds())
	}
	close(j.done)
}

// finish stores a job's end, waiting out a store outage (persist): with a shared store only
// while this run still holds the job (recorded is false when another attempt took it over).
func (h *hub) finish(id, status, reason string, at time.Time) (recorded bool, err error) {
	if h.s.rep == nil {
		err = h.s.persist(id, func() error { return h.s.store.Finish(id, status, reason, at) })
		return err == nil, err
	}
	hold, ok := h.hold(id)
	if !ok {
		return false, nil
	}
	err = h.s.persist(id, func() (err error) {
		recorded, err = h.s.rep.q.FinishOwned(hold, id, status, reason, at)
		return err
	})
	if err == nil && !recorded {
		h.s.log.Warn("job ended here after its claim was lost; its end is the new owner's to record", "id", id)
	}
	return recorded, err
}

// closeAll ends every event stream (shutdown): streams see done closed while the job is still
// queued or running and tell the client so.
func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range []map[string]*liveJob{h.live, h.watched} {
		for id, j := range m {
			close(j.done)
			delete(m, id)
		}
	}
}
