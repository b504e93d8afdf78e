package server

import (
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
	if err == nil {
		err = s.visible(c, g.ID, g.Key, g.ExpiresAt) // another key's, or expired: 404
	}
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
			// the end can arrive while a shared database comes back from an outage (the runner's
			// write went through, this replica's pool still holds a cut connection): the read
			// rides it out, so the stream ends with "done" rather than closing like a shutdown
			var final api.Generation
			gone := false
			err := s.readForWatcher(c.Request.Context(), func() (err error) {
				final, err = s.view(id)
				if errors.Is(err, store.ErrNotFound) { // deleted: waiting will not bring it back
					gone, err = true, nil
				}
				return err
			})
			if err != nil || gone {
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
