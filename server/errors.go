package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"marspec/api"
	"marspec/generation"
	"marspec/scheduler"
	"marspec/store"
)

// Errors of the HTTP layer itself.
var (
	errUnauthorized = errors.New("missing or wrong API token (send 'Authorization: Bearer TOKEN')")
	errConflict     = errors.New("conflict")
	errNotFound     = errors.New("not found")
)

// notFoundError is a 404 whose message says what is missing.
type notFoundError string

func (e notFoundError) Error() string        { return string(e) }
func (e notFoundError) Is(target error) bool { return target == errNotFound }

func notFound(msg string) error { return notFoundError(msg) }

// badField is a malformed request that never reached validation (JSON, query, path).
func badField(field, msg string) error {
	return &generation.FieldError{Field: field, Reason: msg}
}

// statusOf is the one mapping from errors to HTTP statuses.
func statusOf(err error) int {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errIdempotencyConflict): // before ErrInvalid: it names its field too
		return http.StatusUnprocessableEntity
	case errors.Is(err, generation.ErrInvalid):
		return http.StatusBadRequest
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized
	case errors.As(err, new(*limitError)):
		return http.StatusTooManyRequests
	case errors.Is(err, store.ErrNotFound), errors.Is(err, errNotFound):
		return http.StatusNotFound
	case errors.Is(err, errConflict), errors.Is(err, scheduler.ErrDuplicate):
		return http.StatusConflict
	case errors.Is(err, scheduler.ErrQueueFull), errors.Is(err, store.ErrQueueFull), errors.Is(err, scheduler.ErrClosed), errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail writes err as {"error", "field"} with its status (in OpenAI's shape on the OpenAI
// routes, openai.go); 500s are logged and their detail kept out of the answer. A store that
// is down is a 503 naming which store and why in words without addresses
// (store.UnavailableError); the driver's message goes to the log.
func (s *Server) fail(c *gin.Context, err error) {
	code := statusOf(err)
	body := api.ErrorBody{Error: err.Error(), Field: generation.Field(err)}
	var tooBig *http.MaxBytesError
	var down *store.UnavailableError
	var limited *limitError
	switch {
	case code == http.StatusInternalServerError:
		s.log.Error("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", detail(err))
		body = api.ErrorBody{Error: "internal error (logged)"}
	case errors.As(err, &down):
		s.log.Warn("request met a store outage", "method", c.Request.Method, "path", c.Request.URL.Path, "err", down.Detail())
		body = api.ErrorBody{Error: down.Error()}
		c.Header("Retry-After", strconv.Itoa(max(1, int(s.cfg.RetryAfter.Seconds()))))
	case errors.As(err, &limited):
		body.Limit = limited.limit
		c.Header("Retry-After", retrySeconds(limited.retry))
	case code == http.StatusServiceUnavailable:
		c.Header("Retry-After", strconv.Itoa(max(1, int(s.cfg.RetryAfter.Seconds()))))
	case errors.As(err, &tooBig):
		body.Error = "request body larger than " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"
	}
	answerError(c, code, body)
}

// answerError writes an error body: marspec's, or OpenAI's on the OpenAI routes.
func answerError(c *gin.Context, code int, body api.ErrorBody) {
	if isOpenAIPath(c.Request.URL.Path) {
		c.AbortWithStatusJSON(code, openAIErrorOf(code, body))
		return
	}
	c.AbortWithStatusJSON(code, body)
}

// decodeStrict reads one JSON object: unknown fields, trailing data and wrong types are errors
// naming the field.
func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badField("body", "trailing data after the JSON object")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil {
		return badField("body", "more than one JSON value")
	}
	return nil
}

func jsonError(err error) error {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return err
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body" // the top-level value is not an object
		}
		return badField(field, "must be "+jsonKind(typeErr.Type.String())+", not a JSON "+typeErr.Value)
	case errors.As(err, &syntax):
		return badField("body", "malformed JSON at byte "+strconv.FormatInt(syntax.Offset, 10))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badField(name, "unknown field (see /openapi.json)")
	case errors.Is(err, io.EOF):
		return badField("body", "empty; a JSON object is expected")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badField("body", "malformed JSON: it ends early")
	case strings.HasPrefix(err.Error(), "class "): // api.Classes.UnmarshalJSON
		return badField("class", strings.TrimPrefix(err.Error(), "class "))
	case strings.HasPrefix(err.Error(), "gamma "): // api.Gamma.UnmarshalJSON
		return badField("gamma", strings.TrimPrefix(err.Error(), "gamma "))
	}
	return badField("body", "not a JSON object: "+err.Error())
}

// jsonKind names a Go type as a JSON kind for error messages.
func jsonKind(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "int", "int64":
		return "an integer"
	case "uint64":
		return "a non-negative integer"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "string":
		return "a string"
	case "api.GenerateRequest", "server.openAIImageRequest":
		return "a JSON object"
	}
	return goType
}
