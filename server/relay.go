package server

import (
	"encoding/json"
	"time"

	"marspec/api"
	"marspec/store"
)

// What replicas tell each other over the store's notifications (shared store only): a job was
// queued, a running job's progress, images and end, and a request to cancel a job.

// cancelReason is the error a cancelled job is stored with.
const cancelReason = "cancelled by a DELETE request"

// message is what replicas tell each other.
type message struct {
	Kind     string        `json:"k"` // queued, progress, image, done, cancel
	Job      string        `json:"job,omitempty"`
	Index    int           `json:"i,omitempty"`
	Progress *api.Progress `json:"p,omitempty"`
}

// publish tells other replicas about an event of a job running here; progress at most every
// progressEvery per job (a later one supersedes it), images and ends always.
func (r *replica) publish(id string, ev api.Event) {
	switch ev.Type {
	case "progress":
		r.mu.Lock()
		now := time.Now()
		due := now.Sub(r.lastSent[id]) >= progressEvery || ev.Progress.ImagesDone == ev.Progress.ImagesTotal
		if due {
			r.lastSent[id] = now
		}
		r.mu.Unlock()
		if due {
			r.send(message{Kind: "progress", Job: id, Progress: ev.Progress})
		}
	case "image":
		r.send(message{Kind: "image", Job: id, Index: ev.Image.Index})
	}
}

// ended tells other replicas a job ended (when its end was recorded here: a job another
// replica took over ends there), and forgets its progress throttle.
func (r *replica) ended(id string, recorded bool) {
	r.mu.Lock()
	delete(r.lastSent, id)
	r.mu.Unlock()
	if recorded {
		r.send(message{Kind: "done", Job: id})
	}
	r.poke() // room for another job
}

// send queues a message for the sender goroutine and never blocks the caller (a worker):
// while the database is away and thousands are waiting, it drops them. Nothing depends on
// one message: a later progress supersedes one, a stream's final event lists every image, and
// ends, cancellations and queued jobs are also found by polling.
func (r *replica) send(m message) {
	select {
	case r.out <- m:
	default:
		if m.Kind != "progress" {
			r.s.log.Warn("shared queue: notification dropped (the sender is behind)", "kind", m.Kind, "job", m.Job)
		}
	}
}

// notifyBatch is the most messages one notification statement carries.
const notifyBatch = 256

// sendLoop sends the messages waiting when it comes round, up to notifyBatch, in one
// statement: one a time (a round trip and a commit each) fell behind the images of a busy
// replica with its store 1 ms away, hundreds waiting (docs/BENCHMARKS.md, "A store on other
// machines").
func (r *replica) sendLoop() {
	msgs := make([]string, 0, notifyBatch)
	for {
		select {
		case <-r.ctx.Done():
			return
		case m := <-r.out:
			msgs = append(msgs[:0], encode(m))
		more:
			for len(msgs) < notifyBatch {
				select {
				case m := <-r.out:
					msgs = append(msgs, encode(m))
				default:
					break more
				}
			}
			if err := r.q.Notify(msgs...); err != nil {
				r.s.log.Error("shared queue: notify", "messages", len(msgs), "first", msgs[0], "err", err)
			}
		}
	}
}

func encode(m message) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// receive handles a message from any replica (this one's included).
func (r *replica) receive(payload string) {
	var m message
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		r.s.log.Warn("shared queue: unreadable notification", "payload", payload)
		return
	}
	h := r.s.hub
	switch m.Kind {
	case "queued":
		r.poke()
	case "cancel":
		r.cancelLocal(m.Job)
	case "progress":
		if m.Progress != nil {
			h.remote(m.Job, api.Event{Type: "progress", Progress: m.Progress})
		}
	case "image":
		if !h.watching(m.Job) {
			return
		}
		im, err := r.s.store.Image(store.ImageID(m.Job, m.Index))
		if err != nil {
			r.s.log.Error("shared queue: image event", "job", m.Job, "index", m.Index, "err", err)
			return
		}
		w := wireImage(im)
		h.remote(m.Job, api.Event{Type: "image", Image: &w})
	case "done":
		h.remoteDone(m.Job)
	}
}

// listening hears of the notification connection: once up again, what was missed meanwhile
// is caught by a claim and a check of the watched jobs.
func (r *replica) listening(err error) {
	if err != nil {
		r.s.log.Warn("shared queue: notifications lost; reconnecting in 1 s", "err", err)
		return
	}
	r.poke()
}
