package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"marspec/api"
)

// Named keys: limits that refuse one key while another is served, and jobs that only their
// own key (or an admin) sees; on SQLite and on a PostgreSQL + S3 replica pair.

// Secrets of the test keys (the file holds bob's as a hash).
const (
	aliceSecret = "alice-secret-0123456789"
	bobSecret   = "bob-secret-0123456789ab"
	carolSecret = "carol-secret-0123456789"
	adminSecret = "admin-secret-0123456789"
)

func testKeys() []APIKey {
	bobHash := sha256.Sum256([]byte(bobSecret))
	return []APIKey{
		{Name: "alice", Secret: aliceSecret, Rate: 0.5, Burst: 2},
		{Name: "bob", SecretSHA256: hex.EncodeToString(bobHash[:]), MaxPriority: ptr(5)},
		{Name: "carol", Secret: carolSecret, MaxInFlight: 1},
		{Name: "ops", Secret: adminSecret, Admin: true},
	}
}

func withKeys(c *Config) { c.APIKeys = testKeys() }

// keyed makes the test client of a server with testKeys use the admin key.
func keyed(t *testing.T, ts *testServer) *testServer {
	ts.client = ts.as(t, adminSecret)
	return ts
}

// as is a client of ts with a key's secret.
func (ts *testServer) as(t *testing.T, secret string) *api.Client {
	t.Helper()
	c, err := api.NewClient(ts.http.URL, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var small = api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "draft", Seed: seed(3)}

// A key past its rate gets 429 with Retry-After and the limit's name while another key is
// served at the same moment; a key at its limit of jobs in flight gets 429 on whichever replica
// it asks, while another key is served.
func TestKeyPastItsLimitGets429WhileAnotherIsServed(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		ts := keyed(t, start(t, "", false, withKeys))
		keyLimits(t, ts, ts, func(fn func(string, int)) { ts.afterImage = fn })
	})
	t.Run("postgres+s3", func(t *testing.T) {
		sh := newShared(t, "s3")
		a, b := keyed(t, sh.replica(t, false, withKeys)), keyed(t, sh.replica(t, false, withKeys))
		keyLimits(t, a, b, func(fn func(string, int)) { a.afterImage, b.afterImage = fn, fn })
	})
}

// keyLimits posts to a and b (the same server on SQLite); hook installs an after-image hook
// on every server that may run a job.
func keyLimits(t *testing.T, a, b *testServer, hook func(func(string, int))) {
	// rate: alice has 2 at once, then one every 2 s; bob has no rate
	alice := a.as(t, aliceSecret)
	for i := range 2 { // each waits for its end: no job of these is left to meet the hook below
		if _, err := alice.Generate(t.Context(), small, 15*time.Second); err != nil {
			t.Fatalf("alice's request %d of her burst: %v", i+1, err)
		}
	}
	_, err := alice.Generate(t.Context(), small, 0)
	var e *api.Error
	if !asError(err, &e) || e.Status != http.StatusTooManyRequests || e.Body.Limit != api.LimitRate || e.RetryAfter < time.Second ||
		!strings.Contains(e.Body.Error, `"alice"`) {
		t.Fatalf("alice past her rate: %v (%+v)", err, e)
	}
	if _, err := a.as(t, bobSecret).Generate(t.Context(), small, 15*time.Second); err != nil {
		t.Fatalf("bob, at the moment alice is refused: %v", err)
	}

	// in flight: carol's first job is held running; her second is refused on both replicas
	var hold atomic.Bool
	hold.Store(true)
	held, open := make(chan string, 16), make(chan struct{})
	hook(func(job string, _ int) {
		if hold.Load() {
			held <- job
			<-open
		}
	})
	defer func() { hold.Store(false); close(open) }()
	first, err := a.as(t, carolSecret).Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"2"}, N: 3, Mode: "draft", Seed: seed(5)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, held, "carol's first image")
	for _, ts := range []*testServer{a, b} {
		_, err = ts.as(t, carolSecret).Generate(t.Context(), small, 0)
		if !asError(err, &e) || e.Status != http.StatusTooManyRequests || e.Body.Limit != api.LimitMaxInFlight || e.RetryAfter < time.Second {
			t.Fatalf("carol's second job while %s is in flight: %v", first.ID, err)
		}
	}
	if _, err := b.as(t, bobSecret).Generate(t.Context(), small, 0); err != nil {
		t.Fatalf("bob while carol is at her limit: %v", err)
	}
	text, err := a.client.Metrics(t.Context())
	if err != nil || !strings.Contains(text, `marspec_key_limited_total{key="alice",limit="rate"} 1`) ||
		!strings.Contains(text, `marspec_key_limited_total{key="carol",limit="max_in_flight"} `) {
		t.Errorf("the refusals are not in the metrics of the replica that made them: %v", err)
	}
}

func asError(err error, e **api.Error) bool {
	v, ok := err.(*api.Error)
	*e = v
	return ok
}

// A key that is not an admin reads, follows, lists, downloads and deletes only its own jobs:
// another key's answer 404 exactly as a job that does not exist. An admin key sees all.
func TestKeySeesOnlyItsOwnJobs(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		ts := keyed(t, start(t, "", false, withKeys))
		ownJobs(t, ts, ts)
	})
	t.Run("postgres+s3", func(t *testing.T) {
		sh := newShared(t, "s3")
		ownJobs(t, keyed(t, sh.replica(t, false, withKeys)), keyed(t, sh.replica(t, false, withKeys)))
	})
}

func ownJobs(t *testing.T, a, b *testServer) {
	mine, err := a.as(t, aliceSecret).Generate(t.Context(), small, 15*time.Second)
	if err != nil || mine.Status != api.StatusSucceeded || mine.Key != "alice" {
		t.Fatalf("alice's job: %+v %v", mine, err)
	}
	nobody := "/v1/generations/00000000-0000-4000-8000-000000000000"
	missing := b.call(t, "GET", nobody, "", "Authorization", "Bearer "+bobSecret)
	bob := []string{"Authorization", "Bearer " + bobSecret}
	for _, path := range []string{mine.Links.Self, mine.Links.Events, mine.Links.Grid, mine.Images[0].URL} {
		ans := b.call(t, "GET", path, "", bob...)
		if ans.code != http.StatusNotFound || string(ans.body) != string(missing.body) {
			t.Errorf("bob GET %s: %d %s; want the 404 of no job, %s", path, ans.code, ans.body, missing.body)
		}
	}
	if ans := b.call(t, "DELETE", mine.Links.Self, "", bob...); ans.code != http.StatusNotFound {
		t.Errorf("bob DELETE of alice's job: %d %s", ans.code, ans.body)
	}
	if _, err := a.as(t, aliceSecret).Generation(t.Context(), mine.ID); err != nil {
		t.Fatalf("alice's job after bob's DELETE: %v", err)
	}
	theirs, err := b.as(t, bobSecret).Generate(t.Context(), small, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	page, err := b.as(t, bobSecret).List(t.Context(), api.ListOptions{})
	if err != nil || len(page.Generations) != 1 || page.Generations[0].ID != theirs.ID || page.Total != 1 {
		t.Errorf("bob's page: %+v %v; want his job alone", page, err)
	}
	if _, err := b.as(t, bobSecret).List(t.Context(), api.ListOptions{Key: "alice"}); !api.IsStatus(err, http.StatusBadRequest) {
		t.Errorf("bob asking for alice's page: %v; want 400", err)
	}
	ops := a.as(t, adminSecret)
	if page, err := ops.List(t.Context(), api.ListOptions{Key: "alice"}); err != nil || page.Total != 1 || page.Generations[0].ID != mine.ID {
		t.Errorf("the admin's page of alice's jobs: %+v %v", page, err)
	}
	if all, err := ops.List(t.Context(), api.ListOptions{}); err != nil || all.Total != 2 {
		t.Errorf("the admin's page of every job: %+v %v", all, err)
	}
	if _, err := ops.Image(t.Context(), mine.Images[0].URL); err != nil {
		t.Errorf("the admin downloading alice's image: %v", err)
	}
	// the gallery reads with its cookie (an <img> sends no header), never writes with it
	if ans := a.call(t, "GET", mine.Images[0].URL, "", "Cookie", keyCookie+"="+aliceSecret); ans.code != http.StatusOK ||
		!strings.HasPrefix(ans.header.Get("Cache-Control"), "private") {
		t.Errorf("alice's image by cookie: %d %s (Cache-Control %q)", ans.code, ans.body, ans.header.Get("Cache-Control"))
	}
	if ans := a.call(t, "DELETE", mine.Links.Self, "", "Cookie", keyCookie+"="+aliceSecret); ans.code != http.StatusUnauthorized {
		t.Errorf("DELETE with the cookie alone: %d; want 401", ans.code)
	}
	for _, ans := range []answer{a.call(t, "GET", mine.Links.Self, ""), a.call(t, "GET", mine.Links.Self, "", "Authorization", "Bearer wrong-secret-0123456789")} {
		if ans.code != http.StatusUnauthorized {
			t.Errorf("GET without a key, or a wrong one: %d; want 401", ans.code)
		}
	}
	if ans := a.call(t, "GET", "/v1/models", ""); ans.code != http.StatusOK {
		t.Errorf("/v1/models without a key: %d", ans.code)
	}
	if k, err := a.as(t, aliceSecret).Keys(t.Context()); err != nil || k.You != "alice" || len(k.Keys) != 1 || k.Keys[0].Rate != 0.5 {
		t.Errorf("alice's keys: %+v %v", k, err)
	}
	if k, err := ops.Keys(t.Context()); err != nil || len(k.Keys) != 4 {
		t.Errorf("the admin's keys: %+v %v", k, err)
	}
}

// A key asks at most its max_priority: a key that is not an admin and has none is refused
// priority 1 with a 400 naming the field and the limit, a key with max_priority 5 gets 5 and
// not 6, an admin gets 10; GET /v1/keys shows each key's. On SQLite and on a PostgreSQL + S3
// replica pair (posted to one, read from the other).
func TestKeyPriorityBoundedByItsMax(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		ts := keyed(t, start(t, "", false, withKeys))
		keyPriorities(t, ts, ts)
	})
	t.Run("postgres+s3", func(t *testing.T) {
		sh := newShared(t, "s3")
		keyPriorities(t, keyed(t, sh.replica(t, false, withKeys)), keyed(t, sh.replica(t, false, withKeys)))
	})
}

func keyPriorities(t *testing.T, a, b *testServer) {
	at := func(p int) api.GenerateRequest { r := small; r.Priority = &p; return r }
	for _, c := range []struct {
		secret, name string
		asked, most  int
	}{{aliceSecret, "alice", 1, 0}, {carolSecret, "carol", 10, 0}, {bobSecret, "bob", 6, 5}} {
		_, err := a.as(t, c.secret).Generate(t.Context(), at(c.asked), 0)
		var e *api.Error
		want := fmt.Sprintf(`priority %d: above key %q's max_priority %d (allowed: -10 to %d for this key`, c.asked, c.name, c.most, c.most)
		if !asError(err, &e) || e.Status != http.StatusBadRequest || e.Body.Field != "priority" || !strings.Contains(e.Body.Error, want) {
			t.Errorf("%s asking priority %d: %v (%+v); want a 400 on priority saying %q", c.name, c.asked, err, e, want)
		}
	}
	for _, c := range []struct {
		secret string
		asked  int
	}{{aliceSecret, 0}, {carolSecret, -10}, {bobSecret, 5}, {adminSecret, 10}} { // alice has a burst of 2
		g, err := a.as(t, c.secret).Generate(t.Context(), at(c.asked), 15*time.Second)
		if err != nil {
			t.Fatalf("priority %d with %s: %v", c.asked, c.secret, err)
		}
		if g, err = b.as(t, c.secret).Generation(t.Context(), g.ID); err != nil || g.Priority != c.asked || g.Status != api.StatusSucceeded {
			t.Errorf("job of priority %d with %s, read back: %+v %v", c.asked, c.secret, g, err)
		}
	}
	all, err := b.client.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, k := range all.Keys {
		got[k.Name] = k.MaxPriority
	}
	if want := map[string]int{"alice": 0, "bob": 5, "carol": 0, "ops": 10}; !maps.Equal(got, want) {
		t.Errorf("max_priority in the admin's GET /v1/keys: %v; want %v", got, want)
	}
	if ans := b.call(t, "GET", "/v1/keys", "", "Authorization", "Bearer "+aliceSecret); !strings.Contains(string(ans.body), `"max_priority":0`) {
		t.Errorf("alice's GET /v1/keys does not show her max_priority 0: %d %s", ans.code, ans.body)
	}
}

// --token alone stays what it was: reads open, writes need it; its jobs belong to the admin
// key "token", which may ask any priority.
func TestTokenIsTheAdminKey(t *testing.T) {
	ts := start(t, "", false, func(c *Config) { c.Token = "s3cret" })
	if ans := ts.call(t, "POST", "/v1/generations", `{"class": 1}`); ans.code != http.StatusUnauthorized {
		t.Fatalf("POST without the token: %d", ans.code)
	}
	top := small
	top.Priority = ptr(10)
	g, err := ts.client.Generate(t.Context(), top, 15*time.Second)
	if err != nil || g.Key != tokenKeyName || g.Priority != 10 {
		t.Fatalf("POST with the token at priority 10: %+v %v", g, err)
	}
	if ans := ts.call(t, "GET", g.Links.Self, ""); ans.code != http.StatusOK {
		t.Errorf("GET without the token: %d; reads stay open with --token alone", ans.code)
	}
	if ans := ts.call(t, "GET", g.Images[0].URL, ""); ans.code != http.StatusOK || !strings.HasPrefix(ans.header.Get("Cache-Control"), "public") {
		t.Errorf("image without the token: %d %q", ans.code, ans.header.Get("Cache-Control"))
	}
}

// A key file that cannot work is refused at start, naming the key and the field.
func TestKeyFileErrorsNameTheField(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ file, want string }{
		{`{"keys": [{"name": "a", "secret": "short"}]}`, "secret: at least 16"},
		{`{"keys": [{"name": "A b", "secret": "0123456789abcdef"}]}`, "name: allowed"},
		{`{"keys": [{"name": "a", "secret": "0123456789abcdef", "secret_sha256": "00"}]}`, "one of them"},
		{`{"keys": [{"name": "a", "secret_sha256": "xyz"}]}`, "secret_sha256: 64 hex"},
		{`{"keys": [{"name": "a", "secret": "0123456789abcdef", "rate": -1}]}`, "rate -1"},
		{`{"keys": [{"name": "a", "secret": "0123456789abcdef", "max_priority": 11}]}`, "max_priority 11: allowed 0 to 10"},
		{`{"keys": [{"name": "a", "secret": "0123456789abcdef", "max_priority": -1}]}`, "max_priority -1"},
		{`{"keys": [{"name": "a", "secret": "0123456789abcdef"}, {"name": "a", "secret": "0123456789abcdeg"}]}`, `name "a" is taken`},
		{`{"keys": [{"name": "a", "secret": "0123456789abcdef"}, {"name": "b", "secret": "0123456789abcdef"}]}`, "same secret"},
		{`{"keys": [{"name": "a", "secret": "0123456789abcdef", "rpm": 5}]}`, `unknown field "rpm"`},
		{`{"keys": []}`, "no keys"},
	} {
		path := filepath.Join(dir, "keys.json")
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig()
		cfg.KeysFile = path
		err := cfg.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--keys "+path) {
			t.Errorf("%s: %v; want an error naming --keys and %q", c.file, err, c.want)
		}
	}
	good, _ := json.Marshal(map[string]any{"keys": testKeys()})
	path := filepath.Join(dir, "good.json")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.KeysFile = path
	if err := cfg.Check(); err != nil || len(cfg.APIKeys) != 4 {
		t.Fatalf("a good file: %v (%d keys)", err, len(cfg.APIKeys))
	}
}

// The rate limiter is one per key, shared by that key's concurrent requests: of many at once,
// exactly the burst gets through.
func TestKeyRateHoldsUnderConcurrency(t *testing.T) {
	ts := start(t, "", false, func(c *Config) {
		c.APIKeys = []APIKey{{Name: "alice", Secret: aliceSecret, Rate: 0.01, Burst: 3}}
	})
	var wg sync.WaitGroup
	var ok, limited atomic.Int32
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ans := ts.call(t, "DELETE", "/v1/generations/00000000-0000-4000-8000-000000000000", "", "Authorization", "Bearer "+aliceSecret)
			switch ans.code {
			case http.StatusNotFound:
				ok.Add(1)
			case http.StatusTooManyRequests:
				limited.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 3 || limited.Load() != 9 {
		t.Fatalf("%d through, %d limited; want the burst of 3 through", ok.Load(), limited.Load())
	}
}
