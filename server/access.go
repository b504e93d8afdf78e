package server

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"marspec/api"
	"marspec/generation"
	"marspec/store"
)

// Who may do what, by API key (keys.go): every /v1 request is identified, POST and DELETE
// need a key and spend its rate, and a key that is not an admin sees only its own jobs; the
// jobs of other keys answer 404 exactly as a job that does not exist.

// caller is who made a request.
type caller struct {
	name  string // the key's name; "" for no key
	admin bool   // sees every key's jobs (an admin key; anyone on a server without keys)
	key   *namedKey
}

// callerCtx is where identify leaves the caller in the request's gin context.
const callerCtx = "marspec.caller"

func callerOf(c *gin.Context) caller {
	v, _ := c.Get(callerCtx)
	who, _ := v.(caller)
	return who
}

// keyCookie carries the key for the gallery's own reads (an <img> or an EventSource cannot
// send a header); it is taken for GET only, so a page of another site cannot spend it.
const keyCookie = "marspec_key"

// identify finds the caller of a /v1 request. Without keys everyone is an admin, as before
// keys; with --token alone reads need no key; with --keys every route but /v1/models needs
// one. A key that matches nothing is a 401 wherever it is sent.
func (s *Server) identify(c *gin.Context) {
	if s.keys.open() {
		c.Set(callerCtx, caller{admin: true})
		return
	}
	token, given := credentials(c.Request)
	if !given {
		read := c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead
		if c.FullPath() == "/v1/models" || (read && !s.keys.fromFile) {
			c.Set(callerCtx, caller{admin: !s.keys.fromFile})
			return
		}
		s.fail(c, errUnauthorized)
		return
	}
	k := s.keys.match(token)
	if k == nil {
		s.fail(c, errUnauthorized)
		return
	}
	c.Set(callerCtx, caller{name: k.Name, admin: k.Admin, key: k})
	c.Next()
	s.keys.m.requests.WithLabelValues(k.Name, strconv.Itoa(c.Writer.Status())).Inc()
}

// credentials is the bearer token of a request, or for a read its key cookie; given is true
// when either was sent (a malformed Authorization header too: it is refused, not ignored).
func credentials(r *http.Request) (token string, given bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		token, _ = strings.CutPrefix(h, "Bearer ")
		return token, true
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", false
	}
	ck, err := r.Cookie(keyCookie)
	if err != nil || ck.Value == "" {
		return "", false
	}
	v, err := url.QueryUnescape(ck.Value)
	if err != nil {
		return ck.Value, true
	}
	return v, true
}

// auth guards the routes that change state: a key is needed when the server has any, and
// each request spends one of its rate (429 with Retry-After beyond it).
func (s *Server) auth(c *gin.Context) {
	who := callerOf(c)
	if !s.keys.open() && who.key == nil {
		s.fail(c, errUnauthorized)
		return
	}
	if who.key == nil || who.key.limiter == nil {
		return
	}
	now := time.Now()
	r := who.key.limiter.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now) // a refused request spends nothing
		s.keys.m.limited.WithLabelValues(who.name, api.LimitRate).Inc()
		s.fail(c, &limitError{limit: api.LimitRate, retry: wait, msg: fmt.Sprintf(
			"key %q is over its rate limit (%g requests/s to POST and DELETE, burst %d, on each replica); retry after %s",
			who.name, who.key.Rate, who.key.Burst, retrySeconds(wait))})
	}
}

// limitError is a key over one of its limits: 429 with Retry-After and the limit's name.
type limitError struct {
	limit string // api.LimitRate or api.LimitMaxInFlight
	retry time.Duration
	msg   string
}

func (e *limitError) Error() string { return e.msg }

// retrySeconds is a wait as Retry-After says it: whole seconds, at least 1.
func retrySeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// errHidden is a job of another key: a 404 in the words of a job that does not exist, and no
// store.ErrNotFound (DELETE treats that as "no record": remove what is left under the id).
var errHidden = notFound(store.ErrNotFound.Error())

// visible refuses a job the caller may not see (another key's) or that has expired (deleted,
// for clients, from its expiry on, whether or not the sweep has come yet).
func (s *Server) visible(c *gin.Context, id, key string, expiresAt *time.Time) error {
	if who := callerOf(c); !who.admin && who.name != key {
		return errHidden
	}
	if expiresAt != nil && !expiresAt.After(time.Now()) {
		return notFound(fmt.Sprintf("job %s expired at %s: it is deleted with its images", id, expiresAt.UTC().Format(time.RFC3339)))
	}
	return nil
}

// visibleJob reads a job and refuses it as visible does (store.ErrNotFound when there is none).
func (s *Server) visibleJob(c *gin.Context, id string) (store.Job, error) {
	j, err := s.store.Job(id)
	if err != nil {
		return j, err
	}
	return j, s.visible(c, j.ID, j.Key, j.ExpiresAt())
}

// scopeList limits a page of the job list to what the caller may see: its own key's jobs
// (an admin: every key's, or ?key=NAME's), none expired.
func (s *Server) scopeList(c *gin.Context, f *store.Filter) error {
	f.Alive = time.Now()
	who, asked := callerOf(c), c.Query("key")
	switch {
	case who.admin:
		f.Key = asked
	case who.name == "":
		return errUnauthorized
	case asked != "" && asked != who.name:
		return &generation.FieldError{Field: "key", Value: strconv.Quote(truncate(asked)), Allowed: strconv.Quote(who.name) + " or none",
			Reason: "key " + strconv.Quote(who.name) + " lists only its own jobs"}
	default:
		f.Key = who.name
	}
	return nil
}

// listKeys is GET /v1/keys: the caller's key, and the keys it may see (an admin every key,
// others themselves), with their limits and never their secrets.
func (s *Server) listKeys(c *gin.Context) {
	who := callerOf(c)
	out := api.Keys{You: who.name, Keys: []api.Key{}}
	for _, k := range s.keys.keys {
		if who.key != nil && (who.admin || k.Name == who.name) {
			out.Keys = append(out.Keys, api.Key{Name: k.Name, Admin: k.Admin, Rate: k.Rate, Burst: k.Burst, MaxInFlight: k.MaxInFlight,
				MaxPriority: k.highestPriority()})
		}
	}
	c.JSON(http.StatusOK, out)
}

// cacheControl lets caches keep an answer for maxAge but never past the job's expiry, and
// with --keys only in the client's own cache (a shared one must not hand a key's image to
// another key).
func (s *Server) cacheControl(maxAge time.Duration, expires *time.Time) string {
	scope := "public"
	if s.keys.fromFile {
		scope = "private"
	}
	if expires != nil {
		maxAge = min(maxAge, time.Until(*expires))
	}
	return scope + ", max-age=" + strconv.Itoa(max(0, int(maxAge.Seconds())))
}
