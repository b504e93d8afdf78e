package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"marspec/api"
	"marspec/generation"
	"marspec/store"
)

// create is POST /v1/generations: decode strictly, validate, store, queue; with ?wait= hold the
// answer until the job ends or the time passes.
func (s *Server) create(c *gin.Context) {
	wait, err := s.waitParam(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var req api.GenerateRequest
	if err := decodeStrict(c.Request, &req); err != nil {
		s.fail(c, err)
		return
	}
	id, err := s.submit(c, req)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/v1/generations/"+id)
	if wait > 0 {
		s.await(c.Request.Context(), id, wait)
	}
	g, err := s.view(id)
	if err != nil {
		s.fail(c, err)
		return
	}
	code := http.StatusAccepted
	if g.Status != api.StatusQueued && g.Status != api.StatusRunning {
		code = http.StatusOK
	}
	c.JSON(code, g)
}

// submit validates req, stores it as a job and queues it, and returns the job's id: the one
// path every way of asking for images takes (POST /v1/generations, the OpenAI adapter).
func (s *Server) submit(c *gin.Context, req api.GenerateRequest) (string, error) {
	plan, err := generation.Validate(req, s.cat)
	if err == nil {
		err = s.checkHostedFields(&req, callerOf(c))
	}
	if err != nil {
		return "", err
	}
	var replayed bool
	job, err := s.newJob(c, req, plan) // owner, Idempotency-Key, retention; the seed filled in
	if err == nil {
		job, replayed, err = s.admit(c, job) // stored, or the job its Idempotency-Key made
	}
	if err == nil && !replayed {
		err = s.enqueue(job, plan)
	}
	return job.ID, err
}

// get is GET /v1/generations/{id}.
func (s *Server) get(c *gin.Context) {
	g, ok := s.jobFromPath(c)
	if !ok {
		return
	}
	c.JSON(http.StatusOK, g)
}

// jobFromPath is the job named by the path's :id as the API shows it; on an error it has
// answered already and ok is false.
func (s *Server) jobFromPath(c *gin.Context) (g api.Generation, ok bool) {
	id, err := jobID(c)
	if err == nil {
		g, err = s.view(id)
	}
	if err == nil {
		err = s.visible(c, g.ID, g.Key, g.ExpiresAt) // another key's, or expired: 404
	}
	if err != nil {
		s.fail(c, err)
		return g, false
	}
	return g, true
}

// list is GET /v1/generations: a page of jobs, newest first, filtered by class, mode, status.
func (s *Server) list(c *gin.Context) {
	limit, err := intQuery(c, "limit", 20, 1, 200)
	if err != nil {
		s.fail(c, err)
		return
	}
	offset, err := intQuery(c, "offset", 0, 0, 1<<30)
	if err != nil {
		s.fail(c, err)
		return
	}
	var f store.Filter
	if v := c.Query("class"); v != "" {
		ids, err := generation.ParseClass(s.cat.Target, v)
		if err != nil { // names the range and, among many classes, the names like v
			s.fail(c, err)
			return
		}
		if len(ids) != 1 {
			s.fail(c, &generation.FieldError{Field: "class", Value: strconv.Quote(v), Allowed: "one class id or name; leave class out for every class", Reason: "not one class"})
			return
		}
		f.Class = &ids[0]
	}
	switch f.Mode = c.Query("mode"); f.Mode {
	case "", generation.ModeTarget, generation.ModeDraft, generation.ModeSpec:
	default:
		s.fail(c, &generation.FieldError{Field: "mode", Value: strconv.Quote(f.Mode), Allowed: "target, draft, spec", Reason: "unknown"})
		return
	}
	switch f.Status = c.Query("status"); f.Status {
	case "", api.StatusQueued, api.StatusRunning, api.StatusSucceeded, api.StatusFailed, api.StatusCancelled:
	default:
		s.fail(c, &generation.FieldError{Field: "status", Value: strconv.Quote(f.Status), Allowed: "queued, running, succeeded, failed, cancelled", Reason: "unknown"})
		return
	}
	if err := s.scopeList(c, &f); err != nil { // the caller's key's jobs, none expired
		s.fail(c, err)
		return
	}
	after, byCursor := c.GetQuery("after")
	out, err := s.page(f, limit, offset, byCursor, after)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

// page reads one page of the job list, by offset (counting the matches) or after a cursor
// (keyset: no count; an empty after= is the first page), one row more than the page to know
// whether another follows, and the page's images in one query.
func (s *Server) page(f store.Filter, limit, offset int, byCursor bool, after string) (api.GenerationList, error) {
	out := api.GenerationList{Generations: []api.Generation{}, Offset: offset, Limit: limit}
	var jobs []store.Job
	var err error
	if byCursor {
		cur := store.Cursor{Created: time.Unix(0, math.MaxInt64)} // before every job: the first page
		if after != "" {
			var perr error
			if cur, perr = store.ParseCursor(after); perr != nil {
				return out, badField("after", perr.Error())
			}
		}
		out.Offset, out.Total = 0, -1
		jobs, err = s.store.After(f, limit+1, cur)
	} else {
		jobs, out.Total, err = s.store.List(f, limit+1, offset)
	}
	if err != nil {
		return out, err
	}
	if len(jobs) > limit {
		jobs = jobs[:limit]
		out.Next = store.CursorOf(jobs[limit-1]).String()
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	imgs, err := s.store.ImagesOf(ids)
	if err != nil {
		return out, err
	}
	for _, j := range jobs {
		out.Generations = append(out.Generations, s.wire(j, imgs[j.ID]))
	}
	return out, nil
}

// remove cancels a queued or running job (202), or deletes a finished one and its images (204).
func (s *Server) remove(c *gin.Context) {
	id, err := jobID(c)
	if err == nil {
		_, err = s.visibleJob(c, id) // another key's, or expired: 404 (no record: handled below)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.fail(c, err)
		return
	}
	if s.rep != nil {
		s.removeShared(c, id)
		return
	}
	if already, live := s.hub.markCancel(id); live { // running here
		if already {
			s.fail(c, fmt.Errorf("job %s is already being cancelled: %w", id, errConflict))
			return
		}
		// in the store before the 202: a restart must not resume (and finish) a job the
		// client was told is cancelled, should the process die before the run stops
		if err := s.store.AskCancel(id); err != nil {
			s.hub.unmarkCancel(id)
			s.fail(c, err)
			return
		}
		if s.sched.Cancel(id) {
			g, err := s.view(id)
			if err != nil {
				s.fail(c, err)
				return
			}
			c.JSON(http.StatusAccepted, g)
			return
		}
	}
	j, err := s.store.Job(id)
	if errors.Is(err, store.ErrNotFound) {
		err = s.store.DeleteJob(id) // no record: remove what may be left under its id, then 404
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	if j.Status == api.StatusQueued || j.Status == api.StatusRunning {
		s.fail(c, fmt.Errorf("job %s is %s but not scheduled (shutting down?): %w", id, j.Status, errConflict))
		return
	}
	if err := s.store.DeleteJob(id); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// removeShared is DELETE with a shared store. The cancellation is recorded in the database
// before it is acknowledged (a replica that dies right after cannot let the job finish): a
// job no replica runs is cancelled at once; a running one is marked, and its owner stops it
// (this replica at once, another on the notification or, should it be missed, its next
// renewal); a finished one is deleted.
func (s *Server) removeShared(c *gin.Context, id string) {
	out, err := s.rep.q.Cancel(id, cancelReason, time.Now())
	if errors.Is(err, store.ErrNotFound) {
		err = s.store.DeleteJob(id) // no record: remove what may be left under its id, then 404
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	switch out {
	case store.CancelAskedOnce:
		s.fail(c, fmt.Errorf("job %s is already being cancelled: %w", id, errConflict))
		return
	case store.CancelFinished:
		if err := s.store.DeleteJob(id); err != nil {
			s.fail(c, err)
			return
		}
		c.Status(http.StatusNoContent)
		return
	case store.CancelEnded:
		s.rep.cancelLocal(id) // still here after its lease ran out: its end is not recorded
		s.rep.send(message{Kind: "done", Job: id})
	case store.CancelAsked:
		s.rep.cancelLocal(id)
		s.rep.send(message{Kind: "cancel", Job: id})
	}
	g, err := s.view(id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, g)
}
