package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls a marspec server: one method per endpoint. The zero HTTP client has no timeout
// (event streams are long); bound calls with their context.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// NewClient checks base ("http://127.0.0.1:8080") and returns a client; token, if not empty,
// is sent as "Authorization: Bearer TOKEN" (needed for POST and DELETE when the server has one).
func NewClient(base, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http://HOST:PORT", base)
	}
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: u, token: token, http: hc}, nil
}

// Error is a non-2xx answer: its status, the server's {"error", "field", "limit"} and, for
// 503 and 429, how long the server asked to wait.
type Error struct {
	Status     int
	Body       ErrorBody
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("server answered %d: %s", e.Status, e.Body.Error)
	if e.Body.Field != "" && !strings.Contains(e.Body.Error, e.Body.Field) {
		msg += " (field " + e.Body.Field + ")"
	}
	return msg
}

// Ended reports whether a job's status is final.
func (g *Generation) Ended() bool {
	switch g.Status {
	case StatusSucceeded, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Base is the server's address, as given to NewClient.
func (c *Client) Base() string { return c.base.String() }

// Generate submits a request (POST /v1/generations). With wait > 0 the server holds the
// answer until the job ends or wait passes; the job is returned either way. Options add to
// the request (WithIdempotencyKey).
func (c *Client) Generate(ctx context.Context, req GenerateRequest, wait time.Duration, opts ...GenerateOption) (*Generation, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	path := "/v1/generations"
	if wait > 0 {
		path += "?wait=" + url.QueryEscape(wait.String())
	}
	header := http.Header{}
	for _, o := range opts {
		o(header)
	}
	resp, err := c.sendWith(ctx, http.MethodPost, path, body, header)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var g Generation
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
		return nil, fmt.Errorf("POST %s: reading the answer: %w", path, err)
	}
	g.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	return &g, nil
}

// GenerateOption sets something of a POST besides its body.
type GenerateOption func(http.Header)

// WithIdempotencyKey sends key as the Idempotency-Key: a POST retried with the same key and
// request makes no second job but answers with the first (Generation.Replayed); the same key
// with another request is a 422. Keys are the API key's own and last as long as their job.
func WithIdempotencyKey(key string) GenerateOption {
	return func(h http.Header) { h.Set("Idempotency-Key", key) }
}

// Generation fetches one job (GET /v1/generations/{id}).
func (c *Client) Generation(ctx context.Context, id string) (*Generation, error) {
	var g Generation
	return &g, c.do(ctx, http.MethodGet, "/v1/generations/"+url.PathEscape(id), nil, &g)
}

// ListOptions filter and page GET /v1/generations; zero values are the server's defaults.
type ListOptions struct {
	Class, Mode, Status string
	Key                 string // an API key's name: its jobs (an admin key's choice; other keys see only their own)
	Limit, Offset       int
	After               string // a page's Next: the page after it, by cursor (Offset is then ignored)
}

// List returns a page of jobs, newest first (GET /v1/generations).
func (c *Client) List(ctx context.Context, o ListOptions) (*GenerationList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"class": o.Class, "mode": o.Mode, "status": o.Status, "key": o.Key} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Offset > 0 {
		q.Set("offset", strconv.Itoa(o.Offset))
	}
	if o.After != "" {
		q.Set("after", o.After)
	}
	path := "/v1/generations"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l GenerationList
	return &l, c.do(ctx, http.MethodGet, path, nil, &l)
}

// Delete cancels a queued or running job (returning its state) or deletes a finished one
// with its images (returning nil) (DELETE /v1/generations/{id}).
func (c *Client) Delete(ctx context.Context, id string) (*Generation, error) {
	var g Generation
	if err := c.do(ctx, http.MethodDelete, "/v1/generations/"+url.PathEscape(id), nil, &g); err != nil {
		return nil, err
	}
	if g.ID == "" {
		return nil, nil
	}
	return &g, nil
}

// Image downloads a PNG by its URL as given in Image.URL, or by image id.
func (c *Client) Image(ctx context.Context, urlOrID string) ([]byte, error) {
	path := urlOrID
	if !strings.HasPrefix(path, "/") {
		path = "/v1/images/" + url.PathEscape(urlOrID) + ".png"
	}
	var buf bytes.Buffer
	err := c.do(ctx, http.MethodGet, path, nil, &buf)
	return buf.Bytes(), err
}

// Keys is the API key the client uses and the keys it may see, with their limits (GET /v1/keys).
func (c *Client) Keys(ctx context.Context) (*Keys, error) {
	var k Keys
	return &k, c.do(ctx, http.MethodGet, "/v1/keys", nil, &k)
}

// Models lists the server's packs, presets and modes (GET /v1/models).
func (c *Client) Models(ctx context.Context) (*Models, error) {
	var m Models
	return &m, c.do(ctx, http.MethodGet, "/v1/models", nil, &m)
}

// Health is nil when the process answers (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Ready is nil when the server takes jobs (GET /readyz).
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil)
}

// Metrics returns the Prometheus text exposition (GET /metrics).
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var buf bytes.Buffer
	err := c.do(ctx, http.MethodGet, "/metrics", nil, &buf)
	return buf.String(), err
}

// OpenAPI returns the API description (GET /openapi.json).
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	var buf bytes.Buffer
	err := c.do(ctx, http.MethodGet, "/openapi.json", nil, &buf)
	return buf.Bytes(), err
}

// Events follows a job's Server-Sent Events (GET /v1/generations/{id}/events), calling fn
// for each ("generation" first, then "progress" and "image", then "done"), and returns the
// job as the "done" event gives it. If fn returns an error the stream stops with it. A
// stream that ends before its job (the server shutting down) is an error.
func (c *Client) Events(ctx context.Context, id string, fn func(Event) error) (*Generation, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/generations/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20) // a "done" event carries every image's statistics
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0: // end of one event
			if len(data) == 0 {
				continue
			}
			var ev Event
			if err := json.Unmarshal(data, &ev); err != nil {
				return nil, fmt.Errorf("event stream of %s: %w", id, err)
			}
			data = data[:0]
			if fn != nil {
				if err := fn(ev); err != nil {
					return nil, err
				}
			}
			if ev.Type == "done" && ev.Generation != nil {
				if !ev.Generation.Ended() {
					return ev.Generation, fmt.Errorf("job %s is still %s: the server closed the stream (shutting down?)", id, ev.Generation.Status)
				}
				return ev.Generation, nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("event stream of %s: %w", id, err)
	}
	return nil, fmt.Errorf("event stream of %s ended before the job did", id)
}

func (c *Client) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	return c.sendWith(ctx, method, path, body, nil)
}

// sendWith sends a request with extra headers and turns a non-2xx answer into an *Error.
func (c *Client) sendWith(ctx context.Context, method, path string, body []byte, header http.Header) (*http.Response, error) {
	u := c.base.String() + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		e := &Error{Status: resp.StatusCode}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(raw, &e.Body) != nil || e.Body.Error == "" {
			e.Body.Error = strings.TrimSpace(string(raw))
			if e.Body.Error == "" {
				e.Body.Error = http.StatusText(resp.StatusCode)
			}
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return nil, e
	}
	return resp, nil
}

// do sends a request and decodes a JSON answer into out (a *bytes.Buffer takes it raw; nil
// discards it).
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch o := out.(type) {
	case nil:
		_, err = io.Copy(io.Discard, resp.Body)
	case *bytes.Buffer:
		_, err = o.ReadFrom(resp.Body)
	default:
		if resp.StatusCode == http.StatusNoContent {
			return nil
		}
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return nil
}

// IsStatus reports whether err is a server answer with that status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}
