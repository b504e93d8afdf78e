package server

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"marspec/api"
	"marspec/generation"
	"marspec/mar"
	"marspec/scheduler"
	"marspec/store"
)

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
	plan, err := generation.Validate(req, s.cat)
	if err != nil {
		s.fail(c, err)
		return
	}
	seed := plan.Options.Seed
	req.Seed = &seed // stored so the job runs the same again (resume)
	id := uuid.NewString()
	job := store.Job{ID: id, Created: time.Now().UTC(), Status: api.StatusQueued, Request: req, Settings: plan.Settings()}
	// Refuse before storing when the queue is full, then store before submitting so a job the
	// scheduler may start is always on disk (a crash right after still finds it).
	if s.stopping.Load() {
		s.fail(c, scheduler.ErrClosed)
		return
	}
	if s.sched.Depth() >= s.sched.Capacity() {
		s.fail(c, scheduler.ErrQueueFull)
		return
	}
	if err := s.store.CreateJob(job); err != nil {
		s.fail(c, err)
		return
	}
	s.hub.track(id, plan, 0)
	if err := s.sched.Submit(scheduler.Job{ID: id, Plan: plan}); err != nil {
		s.hub.forget(id)
		if derr := s.store.DeleteJob(id); derr != nil {
			s.log.Error("store: dropping refused job", "id", id, "err", derr)
		}
		s.fail(c, err)
		return
	}
	c.Header("Location", "/v1/generations/"+id)
	if wait > 0 {
		if j, ok := s.hub.get(id); ok {
			select {
			case <-j.done:
			case <-time.After(wait):
			case <-c.Request.Context().Done():
			}
		}
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

func (s *Server) waitParam(c *gin.Context) (time.Duration, error) {
	v := c.Query("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		if n, nerr := strconv.Atoi(v); nerr == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
	}
	if err != nil || d < 0 || d > s.cfg.MaxWait {
		return 0, &generation.FieldError{Field: "wait", Value: strconv.Quote(v), Allowed: "a duration from 0s to " + s.cfg.MaxWait.String() + " (e.g. 30s)"}
	}
	return d, nil
}

// jobID reads and checks the :id path parameter: a canonical UUID, nothing else reaches the
// store or the file system.
func jobID(c *gin.Context) (string, error) {
	id := c.Param("id")
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id {
		return "", &generation.FieldError{Field: "id", Value: strconv.Quote(truncate(id)), Allowed: "a job id (lower-case UUID)", Reason: "malformed"}
	}
	return id, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func (s *Server) get(c *gin.Context) {
	id, err := jobID(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	g, err := s.view(id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, g)
}

// view assembles a job from the store and, while it runs, its live progress.
func (s *Server) view(id string) (api.Generation, error) {
	j, err := s.store.Job(id)
	if err != nil {
		return api.Generation{}, err
	}
	imgs, err := s.store.Images(id)
	if err != nil {
		return api.Generation{}, err
	}
	return s.wire(j, imgs), nil
}

func (s *Server) wire(j store.Job, imgs []store.Image) api.Generation {
	g := api.Generation{ID: j.ID, Status: j.Status, Error: j.Error, Created: j.Created, Started: j.Started, Finished: j.Finished,
		Settings: j.Settings, Images: []api.Image{},
		Links: api.Links{Self: "/v1/generations/" + j.ID, Events: "/v1/generations/" + j.ID + "/events"}}
	if j.Started != nil && j.Finished != nil {
		g.Seconds = j.Finished.Sub(*j.Started).Seconds()
	}
	drafted, accepted := 0, 0
	for _, im := range imgs {
		g.Images = append(g.Images, wireImage(im))
		if im.Stats != nil {
			drafted += im.Stats.Drafted
			accepted += im.Stats.Accepted
		}
	}
	if drafted > 0 {
		a := float64(accepted) / float64(drafted)
		g.Alpha = &a
	}
	total := len(j.Settings.Classes)
	L := 0
	if p, ok := s.hub.progress(j.ID); ok {
		g.Progress = p
		g.Progress.ImagesDone = max(p.ImagesDone, len(imgs))
	} else {
		if total > 0 && s.cat.Target != nil {
			L = s.cat.Target.SeqLen()
		}
		g.Progress = api.Progress{ImagesDone: len(imgs), ImagesTotal: total, TokensDone: len(imgs) * L, TokensTotal: total * L}
		g.Progress.Fraction = float64(len(imgs)) / float64(max(1, total))
	}
	return g
}

func wireImage(im store.Image) api.Image {
	return api.Image{ID: im.ID, Index: im.Index, Class: im.Class, ClassName: im.ClassName,
		URL: "/v1/images/" + im.ID + ".png", Seconds: im.Seconds, Stats: im.Stats}
}

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
		if err != nil || len(ids) != 1 {
			s.fail(c, &generation.FieldError{Field: "class", Value: strconv.Quote(v), Allowed: "one class id or name", Reason: "unknown"})
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
	jobs, total, err := s.store.List(f, limit, offset)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := api.GenerationList{Generations: []api.Generation{}, Total: total, Offset: offset, Limit: limit}
	for _, j := range jobs {
		imgs, err := s.store.Images(j.ID)
		if err != nil {
			s.fail(c, err)
			return
		}
		out.Generations = append(out.Generations, s.wire(j, imgs))
	}
	c.JSON(http.StatusOK, out)
}

func intQuery(c *gin.Context, name string, def, lo, hi int) (int, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, &generation.FieldError{Field: name, Value: strconv.Quote(truncate(v)), Allowed: fmt.Sprintf("%d to %d", lo, hi)}
	}
	return n, nil
}

// remove cancels a queued or running job (202), or deletes a finished one and its images (204).
func (s *Server) remove(c *gin.Context) {
	id, err := jobID(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if already, live := s.hub.markCancel(id); live {
		if already {
			s.fail(c, fmt.Errorf("job %s is already being cancelled: %w", id, errConflict))
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

var imageFile = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-([0-9]{1,5})\.png$`)

func (s *Server) image(c *gin.Context) {
	file := c.Param("file")
	if !imageFile.MatchString(file) {
		s.fail(c, &generation.FieldError{Field: "id", Value: strconv.Quote(truncate(file)), Allowed: "JOBID-INDEX.png", Reason: "malformed image name"})
		return
	}
	data, err := s.store.ImagePNG(strings.TrimSuffix(file, ".png"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "public, max-age=31536000, immutable") // an image id never changes content
	c.Data(http.StatusOK, "image/png", data)
}

func (s *Server) models(c *gin.Context) {
	out := api.Models{Presets: generation.PresetNames(), Modes: []string{generation.ModeTarget, generation.ModeDraft, generation.ModeSpec}}
	if man := s.cat.Target; man != nil {
		out.Models = append(out.Models, wireModel("target", man, s.cat.MaxImages))
	}
	if man := s.cat.Draft; man != nil {
		out.Models = append(out.Models, wireModel("draft", man, s.cat.MaxImages))
	}
	c.JSON(http.StatusOK, out)
}

func wireModel(role string, man *mar.Manifest, maxImages int) api.Model {
	return api.Model{Role: role, Name: man.Name, Classes: man.Classes, SeqLen: man.SeqLen(), Steps: man.Diffusion.SamplingSteps,
		Image: [3]int{man.Image.Height, man.Image.Width, man.Image.Channels}, MaxImage: maxImages}
}
