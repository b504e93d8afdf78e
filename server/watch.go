package server

import (
	"errors"
	"maps"
	"slices"
	"time"

	"marspec/api"
	"marspec/store"
)

// Following jobs that may run on another replica (shared store): event streams and ?wait=
// subscribe to a watched job, fed by notifications, and a watched job ends on its "done"
// notification or, if that was missed, when the claim loop's poll finds it ended in the store.

// watch subscribes to a job wherever it runs; the entry goes when its last subscriber does.
func (h *hub) watch(id string) (chan api.Event, chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, ok := h.watched[id]
	if !ok {
		w = &liveJob{subs: map[chan api.Event]struct{}{}, done: make(chan struct{})}
		h.watched[id] = w
	}
	ch := make(chan api.Event, 64)
	w.subs[ch] = struct{}{}
	return ch, w.done, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(w.subs, ch)
		if len(w.subs) == 0 && h.watched[id] == w {
			delete(h.watched, id)
		}
	}
}

func (h *hub) watching(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watched[id] != nil
}

// remote passes an event of a job (running here or elsewhere) to its watchers.
func (h *hub) remote(id string, ev api.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.watched[id]; ok {
		if ev.Progress != nil {
			w.progress = *ev.Progress
		}
		h.publish(w, ev)
	}
}

// remoteDone ends a watched job's streams.
func (h *hub) remoteDone(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.watched[id]; ok {
		close(w.done)
		delete(h.watched, id)
	}
}

// checkWatched ends the watched jobs the store says have ended or are gone (a missed
// notification); a store that does not answer ends nothing (it may be restarting).
func (h *hub) checkWatched() {
	h.mu.Lock()
	ids := slices.Collect(maps.Keys(h.watched))
	h.mu.Unlock()
	for _, id := range ids {
		j, err := h.s.store.Job(id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && ended(j.Status)) {
			h.remoteDone(id)
		}
	}
}

// held are the jobs this replica runs and still holds, with the attempt of each.
func (h *hub) held() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for id, j := range h.live {
		if !j.lost {
			out[id] = j.attempt
		}
	}
	return out
}

// heldUntil is when a live job's claim runs out unless renewed; false when it is not live or
// its claim is lost.
func (h *hub) heldUntil(id string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.live[id]
	if !ok || j.lost {
		return time.Time{}, false
	}
	return j.heldUntil, true
}

// renewed extends the claims of the live jobs among ids (a renewal that began at start).
func (h *hub) renewed(ids []string, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		if j, ok := h.live[id]; ok && !j.lost {
			j.heldUntil = until
		}
	}
}

// markLost records that a live job's claim is gone (another attempt owns it): its run writes
// nothing more and is being stopped. False when the job is no longer live (it ended while
// the renewal was under way: not a loss).
func (h *hub) markLost(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.live[id]
	if !ok || j.lost {
		return false
	}
	j.lost = true
	return true
}

// adopt lets a run still going here continue as a new attempt this replica claimed (its
// own lease ran out, during an outage, and nobody else took the job); false when the run is
// being stopped (its claim was lost, or a DELETE asked): the new claim must not be ended by it.
func (h *hub) adopt(id string, attempt int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.live[id]
	if !ok || j.lost || j.cancel {
		return false
	}
	j.attempt = attempt
	j.heldUntil = time.Now().Add(h.s.rep.lease - h.s.rep.lease/5)
	return true
}
