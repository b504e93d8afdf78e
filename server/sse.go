package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"marspec/api"
	"marspec/store"
)

// events streams a job as Server-Sent Events: the current state first ("generation"), then
// "progress" and "image" events, and a final "done" with the finished job. A job already
// finished gets its state and "done" at once.
func (s *Server) events(c *gin.Context) {
	id, err := jobID(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	ch, done, unsubscribe := s.hub.subscribe(id) // before reading the state: no event falls in between
	defer unsubscribe()
	g, err := s.view(id)
	if err != nil {
		s.fail(c, err)
		return
	}
	w := c.Writer
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(ev api.Event) bool {
		// a stream outlives the server's write timeout: each event extends the deadline
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		data, _ := json.Marshal(ev)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(api.Event{Type: "generation", Generation: &g}) {
		return
	}
	if ch == nil || ended(g.Status) { // not live: finished (or left by a shutdown)
		send(api.Event{Type: "done", Generation: &g})
		return
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case ev := <-ch:
			if !send(ev) {
				return
			}
		case <-done:
			for len(ch) > 0 { // what was published before the end
				if !send(<-ch) {
					return
				}
			}
			final, err := s.viewAfterEnd(c.Request.Context(), id)
			if err != nil {
				return
			}
			send(api.Event{Type: "done", Generation: &final})
			return
		case <-ping.C:
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-c.Request.Context().Done():
			return
		}
	}
}

// viewAfterEnd reads a job that has just ended. With a shared database the end can arrive
// while the database is coming back from an outage (the runner's write went through, this
// replica's pool still holds a cut connection): a failed read is tried again for up to a lease,
// so the stream still ends with "done" rather than closing early and looking like a shutdown.
// A job that is gone (deleted) is not waited for.
func (s *Server) viewAfterEnd(ctx context.Context, id string) (api.Generation, error) {
	wait := 100 * time.Millisecond
	give := time.Now().Add(max(s.cfg.Lease, 2*time.Second))
	for {
		g, err := s.view(id)
		if err == nil || errors.Is(err, store.ErrNotFound) || time.Now().After(give) {
			return g, err
		}
		select {
		case <-ctx.Done():
			return g, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
