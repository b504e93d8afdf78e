package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/store"
)

// testServer is a server on analytic models and a temporary data folder, behind httptest.
type testServer struct {
	*Server
	http   *httptest.Server
	client *api.Client
	dir    string
	gate   *gate
}

// gate holds jobs after their first stored image until opened (a job mid-run on demand).
type gate struct {
	mu     sync.Mutex
	closed bool
	open   chan struct{}
	stored chan string // a job id per stored image
}

func newGate() *gate { return &gate{open: make(chan struct{}), stored: make(chan string, 1000)} }

func (g *gate) hook(job string, _ int) {
	g.stored <- job
	<-g.open
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		close(g.open)
	}
}

func testConfig() Config {
	c := DefaultConfig()
	c.DataDir = "unused"
	c.MaxWait = 20 * time.Second
	c.WriteTimeout = 30 * time.Second
	c.MaxBatch = 4
	c.Drain = 0 // tests that drain set it
	return c
}

// start opens a server over dir (a new folder when empty); edit changes the configuration.
func start(t *testing.T, dir string, held bool, edit func(*Config)) *testServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := testConfig()
	if edit != nil {
		edit(&cfg)
	}
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, st, dir, held, cfg)
}

// startWith is start over a given store (a shared one: replicas).
func startWith(t *testing.T, st *store.Store, dir string, held bool, cfg Config) *testServer {
	t.Helper()
	return startLogged(t, st, dir, held, cfg, io.Discard)
}

// startLogged is startWith with the server's log written to w, for a test that reads it.
func startLogged(t *testing.T, st *store.Store, dir string, held bool, cfg Config, w io.Writer) *testServer {
	t.Helper()
	models, _ := generation.TestModels()
	return startModels(t, st, dir, held, cfg, w, models)
}

// startModels is startLogged serving models (generation.TestModels, some changed by the test).
func startModels(t *testing.T, st *store.Store, dir string, held bool, cfg Config, w io.Writer, models generation.Fixed) *testServer {
	t.Helper()
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	_, cat := generation.TestModels()
	cat.Target, cat.Draft = models["target"].Manifest, models["draft"].Manifest
	cat.MaxImages = 64
	log := slog.New(slog.NewTextHandler(w, nil))
	ui := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>gallery</title>")}, "app.js": {Data: []byte("//")}}
	s := New(cfg, Deps{Catalog: cat, Models: models, Store: st, UI: ui, Log: log})
	ts := &testServer{Server: s, dir: dir}
	if held {
		ts.gate = newGate()
		s.afterImage = ts.gate.hook
	}
	ts.http = httptest.NewServer(s.Handler())
	var err error
	ts.client, err = api.NewClient(ts.http.URL, cfg.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

// stop shuts the server down (once), leaving unfinished jobs in the store.
func (ts *testServer) stop(t *testing.T) {
	if ts.http == nil {
		return
	}
	if ts.gate != nil {
		ts.gate.release()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	ts.http.Close()
	ts.http = nil
	if err := ts.store.Close(); err != nil {
		t.Error(err)
	}
}

// logBuffer is a server log a test reads while the server may still write to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type answer struct {
	code   int
	header http.Header
	body   []byte
}

// call sends a raw request (so tests can send what the typed client never would).
func (ts *testServer) call(t *testing.T, method, path, body string, header ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return answer{resp.StatusCode, resp.Header, buf.Bytes()}
}

// waitEnd follows a job's events until it ends.
func (ts *testServer) waitEnd(t *testing.T, id string) *api.Generation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := ts.client.Events(ctx, id, nil)
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	return g
}

func seed(v uint64) *uint64 { return &v }
