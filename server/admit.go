package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"marspec/api"
	"marspec/generation"
	"marspec/store"
)

// Admission of a new job (POST /v1/generations): its owner (the caller's key), its
// Idempotency-Key, its retention, and the key's limit of jobs in flight.
//
// Idempotency: a POST with an Idempotency-Key that this key used before, for a job not yet
// expired, makes no job: the answer is that job (202, or 200 once it ended, as the first
// answer was), with "Idempotent-Replayed: true", provided the request is the same (as the
// server reads it: field order, spacing, and a class named in any case, by slug or by id do
// not matter); another request under the same key is a 422 naming the job. The store decides
// between replicas (a unique index on (key, Idempotency-Key)). A key lives as long as its job:
// once the job is deleted or expired, the key makes a new one.

// Headers of idempotent requests.
const (
	idempotencyHeader = "Idempotency-Key"
	replayedHeader    = "Idempotent-Replayed"
)

// errIdempotencyConflict is an Idempotency-Key sent again with another request (422).
var errIdempotencyConflict = errors.New("Idempotency-Key reused for another request")

// idempotencyConflict is a 422 that names the header (generation.Field finds it).
type idempotencyConflict struct{ *generation.FieldError }

func (e idempotencyConflict) Unwrap() []error { return []error{errIdempotencyConflict, e.FieldError} }

// newJob is the job a valid POST asks for, not stored yet: its key, Idempotency-Key, request
// hash (of the request as sent, before the seed is filled in) and retention.
func (s *Server) newJob(c *gin.Context, req api.GenerateRequest, plan generation.Plan) (store.Job, error) {
	idem, err := idempotencyKey(c.GetHeader(idempotencyHeader))
	if err != nil {
		return store.Job{}, err
	}
	retain, err := s.retainOf(req)
	if err != nil {
		return store.Job{}, err
	}
	hash, err := requestHash(req, plan)
	if err != nil {
		return store.Job{}, err
	}
	seed := plan.Options.Seed
	req.Seed = &seed // stored so the job runs the same again (resume)
	return store.Job{ID: uuid.NewString(), Created: time.Now().UTC(), Status: api.StatusQueued, Request: req, Settings: plan.Settings(),
		Key: callerOf(c).name, IdempotencyKey: idem, RequestHash: hash, Retain: retain}, nil
}

// admit stores j, or returns the job its Idempotency-Key made before (replayed). A new job
// needs room in the queue (503) and in its key's jobs in flight (429); a replay needs neither.
func (s *Server) admit(c *gin.Context, j store.Job) (stored store.Job, replayed bool, err error) {
	if j.IdempotencyKey != "" {
		prev, err := s.store.JobByIdempotencyKey(j.Key, j.IdempotencyKey)
		if err == nil && !prev.ExpiredAt(j.Created) {
			return s.replay(c, j, prev)
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.Job{}, false, err
		}
	}
	// refuse before storing when this server's queue is full (a shared queue's bound is
	// counted by Admit, with the insert), then store before submitting so a job the scheduler
	// may start is always on disk (a crash right after still finds it)
	if err := s.roomForJob(); err != nil {
		return store.Job{}, false, err
	}
	who := callerOf(c)
	var limits store.Limits
	if who.key != nil {
		limits.MaxInFlight = who.key.MaxInFlight
	}
	if s.rep != nil { // the shared queue's bound, counted in the admission (a single server's scheduler bounds its own)
		limits.Waiting = s.cfg.QueueSize
	}
	stored, replayed, err = s.store.Admit(j, limits)
	var full *store.InFlightError
	switch {
	case errors.As(err, &full):
		s.keys.m.limited.WithLabelValues(who.name, api.LimitMaxInFlight).Inc()
		return store.Job{}, false, &limitError{limit: api.LimitMaxInFlight, retry: s.cfg.RetryAfter, msg: err.Error()}
	case err != nil:
		return store.Job{}, false, err
	case replayed: // another request (here or on another replica) stored it first
		return s.replay(c, j, stored)
	}
	s.keys.m.jobs.WithLabelValues(who.name).Inc()
	return stored, false, nil
}

// replay answers a POST with the job an earlier one made under its Idempotency-Key, if it
// asked for the same.
func (s *Server) replay(c *gin.Context, j, prev store.Job) (store.Job, bool, error) {
	if prev.RequestHash != j.RequestHash {
		return store.Job{}, false, idempotencyConflict{&generation.FieldError{Field: idempotencyHeader, Value: strconv.Quote(j.IdempotencyKey),
			Reason:  fmt.Sprintf("%v: job %s was made with it from a different request body", errIdempotencyConflict, prev.ID),
			Allowed: "the same request again, or a new key for a new request"}}
	}
	s.keys.m.replayed.WithLabelValues(j.Key).Inc()
	c.Header(replayedHeader, "true")
	return prev, true, nil
}

// idempotencyKey checks the Idempotency-Key header ("" when none was sent).
func idempotencyKey(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	ok := len(v) <= 255
	for i := 0; ok && i < len(v); i++ {
		ok = v[i] >= 0x20 && v[i] < 0x7f
	}
	if !ok {
		return "", &generation.FieldError{Field: idempotencyHeader, Value: strconv.Quote(truncate(v)),
			Allowed: "1 to 255 printable ASCII characters; a random UUID per request is a good choice", Reason: "malformed"}
	}
	return v, nil
}

// requestHash identifies a request by its canonical form: the decoded request encoded again,
// with its classes as the ids of its images (a name in any case, a slug or an id; n of each).
func requestHash(req api.GenerateRequest, plan generation.Plan) (string, error) {
	images := plan.Settings().Classes
	req.Class, req.N = nil, 0
	b, err := json.Marshal(struct {
		Images  []int               `json:"images"`
		Request api.GenerateRequest `json:"request"`
	}{images, req})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// retainOf is how long the job is kept once it ends: the request's expires_in, at most
// --retain when the server has one; without expires_in, --retain (0: forever).
func (s *Server) retainOf(req api.GenerateRequest) (time.Duration, error) {
	if req.ExpiresIn == nil {
		return s.cfg.Retain, nil
	}
	bound := maxRetain
	if s.cfg.Retain > 0 {
		bound = s.cfg.Retain
	}
	most := int64(bound / time.Second)
	if n := *req.ExpiresIn; n < 1 || n > most {
		allowed := fmt.Sprintf("1 to %d seconds", most)
		if s.cfg.Retain > 0 {
			allowed += fmt.Sprintf(": this server keeps jobs at most --retain %s", s.cfg.Retain)
		}
		return 0, &generation.FieldError{Field: "expires_in", Value: strconv.FormatInt(n, 10), Allowed: allowed}
	}
	return time.Duration(*req.ExpiresIn) * time.Second, nil
}
