package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
)

// Retention: the sweep removes expired jobs with their records and objects, and nothing else;
// expired jobs are gone for clients at once; a download under way holds the sweep back.

// holdAll installs, on every server given, an after-image hook that holds every job once
// hold is true (a job mid-run on demand, after others have finished freely).
func holdAll(servers ...*testServer) (hold *atomic.Bool, held chan string, release func()) {
	hold, held = &atomic.Bool{}, make(chan string, 64)
	open := make(chan struct{})
	for _, ts := range servers {
		ts.afterImage = func(job string, _ int) {
			if hold.Load() {
				held <- job
				<-open
			}
		}
	}
	var once sync.Once
	return hold, held, func() { once.Do(func() { hold.Store(false); close(open) }) }
}

// Jobs kept 1 s, an hour and forever, and one still running though kept 1 s: once the first
// has expired it answers 404 and leaves the list, and the sweep removes its record, its image
// records and its objects, and nothing of the others. On a replica pair one replica sweeps.
func TestSweepRemovesExpiredJobsAndNothingElse(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		ts := start(t, "", false, nil)
		sweepsExpired(t, ts, ts)
	})
	t.Run("postgres+s3", func(t *testing.T) {
		sh := newShared(t, "s3")
		sweepsExpired(t, sh.replica(t, false, nil), sh.replica(t, false, nil))
	})
}

func keep(seconds int64) *int64 { return &seconds }

func sweepsExpired(t *testing.T, a, b *testServer) {
	post := func(req api.GenerateRequest, wait time.Duration) *api.Generation {
		t.Helper()
		g, err := a.client.Generate(t.Context(), req, wait)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	short := post(api.GenerateRequest{Class: api.Classes{"0"}, N: 3, Mode: "draft", Seed: seed(1), ExpiresIn: keep(1)}, 15*time.Second)
	hour := post(api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Mode: "draft", Seed: seed(2), ExpiresIn: keep(3600)}, 15*time.Second)
	forever := post(api.GenerateRequest{Class: api.Classes{"2"}, N: 2, Mode: "draft", Seed: seed(3)}, 15*time.Second)
	for _, g := range []*api.Generation{short, hour, forever} {
		if g.Status != api.StatusSucceeded {
			t.Fatalf("job %s: %s", g.ID, g.Status)
		}
	}
	if short.ExpiresIn != 1 || short.ExpiresAt == nil || !short.ExpiresAt.Equal(short.Finished.Add(time.Second)) || forever.ExpiresAt != nil {
		t.Fatalf("expiry in the job: short %d %v (finished %v), forever %v", short.ExpiresIn, short.ExpiresAt, short.Finished, forever.ExpiresAt)
	}
	hold, held, release := holdAll(a, b)
	defer release()
	hold.Store(true)
	running := post(api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Mode: "draft", Seed: seed(4), ExpiresIn: keep(1)}, 0)
	receive(t, held, "the running job's first image")
	objectsBefore := objectKeys(t, a)

	time.Sleep(time.Until(*short.ExpiresAt) + 100*time.Millisecond)
	ans := b.call(t, "GET", short.Images[0].URL, "")
	if ans.code != http.StatusNotFound || !strings.Contains(string(ans.body), "expired") {
		t.Errorf("an expired job's image: %d %s; want 404 saying it expired", ans.code, ans.body)
	}
	if page, err := b.client.List(t.Context(), api.ListOptions{}); err != nil || page.Total != 3 {
		t.Errorf("the list after the expiry: %+v %v; want the three others", page, err)
	}
	// the sweep as it runs a grace period later; on a pair the second replica finds the
	// lease taken and removes nothing
	later := time.Now().Add(a.ret.grace() + time.Second)
	na, err := a.ret.sweep(later)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := b.ret.sweep(later)
	if err != nil {
		t.Fatal(err)
	}
	if na+nb != 1 || (a != b && nb != 0) {
		t.Fatalf("the sweeps removed %d and %d jobs; want 1, by the first replica", na, nb)
	}
	if _, err := a.store.Job(short.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired job's record: %v", err)
	}
	if imgs, err := a.store.Images(short.ID); err != nil || len(imgs) != 0 {
		t.Errorf("the expired job's image records: %d %v", len(imgs), err)
	}
	after := objectKeys(t, a)
	for key := range objectsBefore {
		gone := !after[key]
		if strings.HasPrefix(key, short.ID+"/") != gone {
			t.Errorf("object %s: removed %v", key, gone)
		}
	}
	for _, g := range []*api.Generation{hour, forever, running} {
		j, err := a.store.Job(g.ID)
		imgs, ierr := a.store.Images(g.ID)
		if err != nil || ierr != nil || len(imgs) == 0 {
			t.Errorf("job %s after the sweep: %v %v, %d images", g.ID, err, ierr, len(imgs))
		}
		if g == running && j.Status != api.StatusRunning {
			t.Errorf("the running job is %s", j.Status)
		}
	}
	release()
	if g := a.waitEnd(t, running.ID); g.Status != api.StatusSucceeded {
		t.Errorf("the job that ran through the sweep: %s %q", g.Status, g.Error)
	}
}

// objectKeys lists the image store's keys.
func objectKeys(t *testing.T, ts *testServer) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	if err := ts.store.Blobs.Keys(func(k string) error { keys[k] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

// A download begun before a job's expiry finishes, and the sweep leaves the job alone while it
// is under way on the sweeping replica; once it ends the next sweep removes the job.
func TestSweepWaitsForADownloadUnderWay(t *testing.T) {
	ts := start(t, "", false, nil)
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "draft", Seed: seed(6), ExpiresIn: keep(1)}, 15*time.Second)
	if err != nil || g.Status != api.StatusSucceeded {
		t.Fatalf("%+v %v", g, err)
	}
	reading, done := make(chan struct{}), make(chan struct{})
	ts.ret.held = func(job string) {
		if job == g.ID {
			close(reading)
			<-done
		}
	}
	got := make(chan answer, 1)
	go func() { got <- ts.call(t, "GET", g.Images[0].URL, "") }()
	receive(t, reading, "the download under way")
	time.Sleep(time.Until(*g.ExpiresAt) + 100*time.Millisecond)
	later := time.Now().Add(ts.ret.grace() + time.Second)
	if n, err := ts.ret.sweep(later); err != nil || n != 0 {
		t.Fatalf("a sweep during the download removed %d jobs (%v)", n, err)
	}
	close(done)
	if ans := receive(t, got, "the download"); ans.code != http.StatusOK || len(ans.body) == 0 {
		t.Fatalf("the download begun before the expiry: %d", ans.code)
	}
	ts.ret.held = nil
	if n, err := ts.ret.sweep(later); err != nil || n != 1 {
		t.Fatalf("the sweep after the download removed %d jobs (%v); want 1", n, err)
	}
}

// expires_in is bounded by --retain, which is also its default; a request asking for more is
// a 400 naming the bound.
func TestExpiresInIsBoundedByRetain(t *testing.T) {
	ts := start(t, "", false, func(c *Config) { c.Retain = time.Hour })
	for _, body := range []string{`{"class": 1, "expires_in": 7200}`, `{"class": 1, "expires_in": 0}`} {
		ans := ts.call(t, "POST", "/v1/generations", body, "Content-Type", "application/json")
		if ans.code != http.StatusBadRequest || !strings.Contains(string(ans.body), `"field":"expires_in"`) ||
			!strings.Contains(string(ans.body), "1 to 3600 seconds") || !strings.Contains(string(ans.body), "--retain 1h0m0s") {
			t.Errorf("%s: %d %s; want 400 on expires_in naming --retain", body, ans.code, ans.body)
		}
	}
	g, err := ts.client.Generate(t.Context(), small, 15*time.Second)
	if err != nil || g.ExpiresIn != 3600 || g.ExpiresAt == nil || !g.ExpiresAt.Equal(g.Finished.Add(time.Hour)) {
		t.Fatalf("a job under --retain 1h: %+v %v", g, err)
	}
	short, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, ExpiresIn: keep(60)}, 0)
	if err != nil || short.ExpiresIn != 60 {
		t.Fatalf("a shorter expires_in: %+v %v", short, err)
	}
	cc := ts.call(t, "GET", g.Images[0].URL, "").header.Get("Cache-Control")
	if age, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(cc, "public, max-age="), ", immutable")); err != nil || age > 3600 || age < 3500 {
		t.Errorf("an image kept an hour is cached for %q; want at most its hour", cc)
	}
}

// A job kept 1 s whose webhook receiver never answers stays while its calls are pending: a
// sweep past its expiry leaves it and its deliveries alone; the calls are tried until
// --webhook-attempts and given up, counted as give-ups; then the sweep removes it. No call is
// logged as lost. On SQLite and on PostgreSQL + S3.
func TestSweepKeepsAJobWhileItsWebhooksArePending(t *testing.T) {
	edit := func(c *Config) {
		webhooksOn(c)
		c.WebhookTimeout = time.Second // three tries: given up no sooner than 3 s after the first
		c.WebhookAttempts = 3
	}
	t.Run("sqlite", func(t *testing.T) {
		cfg := testConfig()
		edit(&cfg)
		dir := t.TempDir()
		st, err := store.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		log := &logBuffer{}
		sweepKeepsPendingWebhooks(t, startLogged(t, st, dir, false, cfg, log), log)
	})
	t.Run("postgres+s3", func(t *testing.T) {
		sh := newShared(t, "s3")
		meta, err := store.OpenPostgres(sh.dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig()
		cfg.Lease = time.Second
		edit(&cfg)
		log := &logBuffer{}
		sweepKeepsPendingWebhooks(t, startLogged(t, store.New(meta, sh.blobs(t)), "", false, cfg, log), log)
	})
}

func sweepKeepsPendingWebhooks(t *testing.T, ts *testServer, log *logBuffer) {
	fastRetries(t)
	rc := newReceiver(t, func(string, int) int { return 0 }) // every try hangs until the sender's timeout
	var jobs []string
	for i := range 3 {
		req := api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "draft", Seed: seed(uint64(20 + i)), ExpiresIn: keep(1), Webhook: rc.hookURL()}
		g, err := ts.client.Generate(t.Context(), req, 0)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, g.ID)
	}
	for _, id := range jobs {
		if g := ts.waitEnd(t, id); g.Status != api.StatusSucceeded {
			t.Fatalf("job %s: %s", id, g.Status)
		}
	}
	for range 2 * len(jobs) { // started and succeeded of each job
		receive(t, rc.hung, "a webhook call")
	}
	later := time.Now().Add(ts.ret.grace() + 2*time.Second) // past every job's expiry
	if n, err := ts.ret.sweep(later); err != nil || n != 0 {
		t.Fatalf("a sweep while the webhook calls are pending removed %d jobs (%v); want none", n, err)
	}
	for _, id := range jobs {
		if ds, err := ts.hooks.outbox.DeliveriesOf(id); err != nil || len(ds) != 2 {
			t.Fatalf("job %s's deliveries after the sweep: %+v %v; want both, pending", id, ds, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for n, _ := ts.hooks.outbox.PendingDeliveries(); n > 0; n, _ = ts.hooks.outbox.PendingDeliveries() {
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries still pending", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range jobs {
		ds, err := ts.hooks.outbox.DeliveriesOf(id)
		if err != nil || len(ds) != 2 {
			t.Fatalf("job %s's deliveries: %+v %v", id, ds, err)
		}
		for _, d := range ds {
			if d.State != store.DeliveryFailed || d.Attempts != 3 {
				t.Errorf("delivery %s: %s after %d tries; want given up after 3", d.ID, d.State, d.Attempts)
			}
		}
	}
	if text, err := ts.client.Metrics(t.Context()); err != nil || !strings.Contains(text, `marspec_webhook_deliveries_total{outcome="gave_up"} 6`) {
		t.Errorf("give-ups counted: %v\n%s", err, grepLines(text, "marspec_webhook"))
	}
	if n, err := ts.ret.sweep(later); err != nil || n != len(jobs) {
		t.Fatalf("the sweep after the calls were given up removed %d jobs (%v); want %d", n, err, len(jobs))
	}
	if strings.Contains(log.String(), "tried again") {
		t.Errorf("a delivery was logged as not recorded:\n%s", log)
	}
}
