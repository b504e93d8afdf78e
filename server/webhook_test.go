package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"marspec/api"
)

// Webhooks: signed, retried after failures, delivered at least once across a restart and a
// replica killed mid-delivery, and refused at POST where the server may not call them.

const testSecret = "test-secret-0123456789abcdef"

// verifyAsDocumented is the receiver's check from docs/api.md, "Webhooks", word for word
// (TestDocsShowTheWebhookCheck keeps the two equal).
func verifyAsDocumented(secret string, r *http.Request, body []byte) error {
	ts := r.Header.Get("Marspec-Webhook-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("no timestamp")
	}
	if age := time.Since(time.Unix(sec, 0)); age > 5*time.Minute || age < -5*time.Minute {
		return errors.New("timestamp outside the 5-minute window: a replay?")
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := "v1=" + hex.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(r.Header.Get("Marspec-Webhook-Signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("bad signature")
}

// receiver is a webhook endpoint on loopback. answer gives the status of the n-th try of a
// delivery (1-based); 0 hangs until the caller gives up (a sender killed mid-call).
type receiver struct {
	*httptest.Server
	answer func(id string, n int) int
	mu     sync.Mutex
	tries  map[string]int
	calls  []hookCall // answered with 2xx
	got    chan hookCall
	hung   chan hookCall // each try that hangs
}

type hookCall struct {
	id      string
	header  http.Header
	body    []byte
	payload api.WebhookPayload
	err     error // of verifyAsDocumented
}

func newReceiver(t *testing.T, answer func(id string, n int) int) *receiver {
	rc := &receiver{answer: answer, tries: map[string]int{}, got: make(chan hookCall, 100), hung: make(chan hookCall, 100)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := hookCall{id: r.Header.Get(api.HeaderWebhookID), header: r.Header.Clone(), body: body, err: verifyAsDocumented(testSecret, r, body)}
		if err := json.Unmarshal(body, &c.payload); err != nil && c.err == nil {
			c.err = err
		}
		rc.mu.Lock()
		rc.tries[c.id]++
		n := rc.tries[c.id]
		rc.mu.Unlock()
		status := rc.answer(c.id, n)
		if status == 0 {
			rc.hung <- c
			<-r.Context().Done()
			return
		}
		w.WriteHeader(status)
		if status/100 == 2 {
			rc.mu.Lock()
			rc.calls = append(rc.calls, c)
			rc.mu.Unlock()
			rc.got <- c
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

// hookURL is the receiver's URL for a job's webhook (with a query, as a receiver's own token
// would be).
func (rc *receiver) hookURL() string { return rc.URL + "/hooks/marspec?from=test" }

// webhooksOn configures a server to call loopback receivers, quickly.
func webhooksOn(c *Config) {
	c.WebhookSecret = testSecret
	c.WebhookHosts = "127.0.0.1"
	c.WebhookTimeout = 500 * time.Millisecond // a killed sender's lease: 1 s
}

// fastRetries shortens the backoff for a test.
func fastRetries(t *testing.T) {
	first := webhookFirstRetry
	webhookFirstRetry = 20 * time.Millisecond
	t.Cleanup(func() { webhookFirstRetry = first })
}

// expectCalls waits for the receiver's next 2xx calls, one per event of job in any order
// (each event's delivery is retried on its own), and checks each is signed and names them.
func expectCalls(t *testing.T, rc *receiver, job string, events ...string) map[string]hookCall {
	t.Helper()
	got := map[string]hookCall{}
	for range events {
		c := receive(t, rc.got, "the webhooks of job "+job)
		if c.err != nil {
			t.Fatalf("webhook %s: %v", c.id, c.err)
		}
		event := c.payload.Event
		if c.id != job+":"+event || c.payload.ID != c.id || c.payload.Generation.ID != job || got[event].id != "" {
			t.Fatalf("webhook %s: payload %s %s of job %s, want one each of %v of %s", c.id, c.payload.ID, event, c.payload.Generation.ID, events, job)
		}
		got[event] = c
	}
	for _, e := range events {
		if got[e].id == "" {
			t.Fatalf("no %s webhook of %s: %v", e, job, got)
		}
	}
	return got
}

// settled waits until a job's n deliveries are no longer pending (the receiver may see a call
// a moment before the server records its answer) and returns its webhook.
func settled(t *testing.T, ts *testServer, id string, n int) *api.Webhook {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, err := ts.client.Generation(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		done := g.Webhook != nil && len(g.Webhook.Deliveries) == n
		for _, d := range g.Webhook.Deliveries {
			done = done && d.State != "pending"
		}
		if done {
			return g.Webhook
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: deliveries still pending: %+v", id, g.Webhook)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A webhook is called on the job's start and end, signed as documented, retried after 500s
// with backoff, with the same body on every try; the job shows its deliveries.
func TestWebhookSignedAndRetried(t *testing.T) {
	fastRetries(t)
	rc := newReceiver(t, func(id string, n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	ts := start(t, "", false, webhooksOn)
	req := api.GenerateRequest{Class: api.Classes{"2"}, N: 2, Mode: "target", Seed: seed(5), Webhook: rc.hookURL()}
	g, err := ts.client.Generate(t.Context(), req, 10*time.Second)
	if err != nil || g.Status != api.StatusSucceeded {
		t.Fatalf("job: %+v, %v", g, err)
	}
	calls := expectCalls(t, rc, g.ID, api.EventStarted, api.EventSucceeded)
	started, done := calls[api.EventStarted], calls[api.EventSucceeded]
	if started.payload.Generation.Status != api.StatusRunning || done.payload.Generation.Status != api.StatusSucceeded ||
		len(done.payload.Generation.Images) != 2 || done.payload.Generation.Webhook == nil {
		t.Errorf("payloads: started %s, succeeded %s with %d images", started.payload.Generation.Status,
			done.payload.Generation.Status, len(done.payload.Generation.Images))
	}
	if err := api.VerifyWebhook([]byte(testSecret), done.header, done.body, time.Minute, time.Now()); err != nil {
		t.Errorf("api.VerifyWebhook: %v", err)
	}
	if err := api.VerifyWebhook([]byte("another-secret-0123456789"), done.header, done.body, time.Minute, time.Now()); !errors.Is(err, api.ErrWebhookSignature) {
		t.Errorf("another secret: %v", err)
	}
	w := settled(t, ts, g.ID, 2)
	if w.URL != rc.URL+"/hooks/marspec?…" || len(w.Events) != 4 { // the query may hold a token: not shown
		t.Fatalf("the job's webhook: %+v", w)
	}
	for _, d := range w.Deliveries {
		if d.State != "delivered" || d.Attempts != 3 || d.LastStatus != 204 || d.Delivered == nil {
			t.Errorf("delivery %+v, want delivered on the third try", d)
		}
	}
	text, err := ts.client.Metrics(t.Context())
	if err != nil || !strings.Contains(text, `marspec_webhook_deliveries_total{outcome="retried"} 4`) ||
		!strings.Contains(text, `marspec_webhook_deliveries_total{outcome="delivered"} 2`) || !strings.Contains(text, "marspec_webhook_pending 0") {
		t.Errorf("webhook metrics: %v\n%s", err, grepLines(text, "marspec_webhook"))
	}
}

// Only the events asked for are called; a receiver that never answers 2xx is given up on
// after --webhook-attempts tries, and one that answers 410 at once.
func TestWebhookEventsAndGivingUp(t *testing.T) {
	fastRetries(t)
	rc := newReceiver(t, func(id string, n int) int {
		if strings.HasSuffix(id, ":cancelled") {
			return http.StatusGone
		}
		return http.StatusBadGateway
	})
	ts := start(t, "", true, func(c *Config) { webhooksOn(c); c.WebhookAttempts = 3 })
	failing := api.GenerateRequest{Class: api.Classes{"2"}, N: 1, Mode: "target", Seed: seed(5), Webhook: rc.hookURL(), WebhookEvents: []string{"succeeded"}}
	g, err := ts.client.Generate(t.Context(), failing, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, ts.gate.stored, "its image")
	ts.gate.release()
	ts.waitEnd(t, g.ID)
	cancelled := api.GenerateRequest{Class: api.Classes{"2"}, N: 3, Mode: "target", Seed: seed(6), Webhook: rc.hookURL(), WebhookEvents: []string{"cancelled", "failed"}}
	c, err := ts.client.Generate(t.Context(), cancelled, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.Delete(t.Context(), c.ID); err != nil {
		t.Fatal(err)
	}
	ts.waitEnd(t, c.ID)
	if d := settled(t, ts, g.ID, 1).Deliveries[0]; d.State != "failed" || d.Attempts != 3 || d.LastStatus != 502 || d.Event != "succeeded" || !strings.Contains(d.LastError, "502") {
		t.Errorf("given up after its tries: %+v", d)
	}
	if d := settled(t, ts, c.ID, 1).Deliveries[0]; d.State != "failed" || d.Attempts != 1 || d.LastStatus != 410 || d.Event != "cancelled" {
		t.Errorf("given up after a 410: %+v", d)
	}
}

// A server stopped while its webhook call hangs delivers it after a restart, once the
// stopped call's lease has run out, with the same body.
func TestWebhookDeliveredAfterARestart(t *testing.T) {
	rc := newReceiver(t, func(id string, n int) int {
		if n == 1 {
			return 0 // the first try hangs until the server stops
		}
		return http.StatusOK
	})
	dir := t.TempDir()
	ts := start(t, dir, false, webhooksOn)
	req := api.GenerateRequest{Class: api.Classes{"2"}, N: 1, Mode: "target", Seed: seed(5), Webhook: rc.hookURL(), WebhookEvents: []string{"succeeded"}}
	g, err := ts.client.Generate(t.Context(), req, 10*time.Second)
	if err != nil || g.Status != api.StatusSucceeded {
		t.Fatalf("job: %+v, %v", g, err)
	}
	receive(t, rc.hung, "the first try")
	ts.stop(t)
	again := start(t, dir, false, webhooksOn)
	c := expectCalls(t, rc, g.ID, api.EventSucceeded)[api.EventSucceeded]
	if c.payload.Generation.Status != api.StatusSucceeded {
		t.Errorf("payload after the restart: %+v", c.payload.Generation)
	}
	if d := settled(t, again, g.ID, 1).Deliveries; d[0].State != "delivered" || d[0].Attempts != 2 {
		t.Errorf("deliveries after the restart: %+v", d)
	}
}

// A webhook the server may not call is a 400 naming the field and what is allowed.
func TestWebhookRefusedAtPost(t *testing.T) {
	off := start(t, "", false, nil)
	listed := start(t, "", false, func(c *Config) {
		c.WebhookSecret = testSecret
		c.WebhookHosts = "hooks.example.com, *.example.org:8443"
	})
	public := start(t, "", false, func(c *Config) { c.WebhookSecret = testSecret })
	for _, c := range []struct {
		ts          *testServer
		body, field string
		want        string
	}{
		{off, `{"class":0,"webhook":"https://hooks.example.com/x"}`, "webhook", "--webhook-secret"},
		{listed, `{"class":0,"webhook":"ftp://hooks.example.com/x"}`, "webhook", "scheme ftp not allowed (allowed: http, https)"},
		{listed, `{"class":0,"webhook":"hooks.example.com/x"}`, "webhook", "not an absolute URL"},
		{listed, `{"class":0,"webhook":"https://user:pw@hooks.example.com/x"}`, "webhook", "credentials"},
		{listed, `{"class":0,"webhook":"https://evil.example.net/x"}`, "webhook", "host evil.example.net is not allowed (allowed: the hosts of --webhook-hosts: hooks.example.com, *.example.org:8443)"},
		{listed, `{"class":0,"webhook":"https://a.example.org/x"}`, "webhook", "not allowed"}, // wrong port
		{listed, `{"class":0,"webhook":"https://hooks.example.com/x","webhook_events":["done"]}`, "webhook_events", "unknown event"},
		{listed, `{"class":0,"webhook":"https://hooks.example.com/x","webhook_events":[]}`, "webhook_events", "empty"},
		{listed, `{"class":0,"webhook_events":["started"]}`, "webhook_events", "without a webhook"},
		{public, `{"class":0,"webhook":"http://127.0.0.1:9/x"}`, "webhook", "private, loopback or link-local"},
		{public, `{"class":0,"webhook":"http://[::ffff:10.0.0.1]/x"}`, "webhook", "private"},
		{public, `{"class":0,"webhook":"http://169.254.169.254/latest"}`, "webhook", "link-local"},
		{public, `{"class":0,"webhook":"http://LocalHost:8080/x"}`, "webhook", "is this machine"},
		{public, `{"class":0,"webhook":"http://[64:ff9b::a9fe:a9fe]/x"}`, "webhook", "private, loopback or link-local"}, // NAT64 of 169.254.169.254
		{public, `{"class":0,"webhook":"http://[fec0::1]/x"}`, "webhook", "private, loopback or link-local"},            // site-local
		{public, `{"class":0,"webhook":"http://[2002:a00:1::1]/x"}`, "webhook", "private, loopback or link-local"},      // 6to4 via 10.0.0.1
		{public, `{"class":0,"webhook":"https://` + strings.Repeat("a", 2050) + `.com/"}`, "webhook", "longer than 2048"},
	} {
		a := c.ts.call(t, "POST", "/v1/generations", c.body)
		var e api.ErrorBody
		_ = json.Unmarshal(a.body, &e)
		if a.code != 400 || e.Field != c.field || !strings.Contains(e.Error, c.want) {
			t.Errorf("%.90s: %d %+v, want 400 on %s saying %q", c.body, a.code, e, c.field, c.want)
		}
	}
	for _, ok := range []struct {
		ts  *testServer
		url string
	}{{listed, "https://hooks.example.com/x"}, {listed, "https://a.b.example.org:8443/x"}, {public, "https://hooks.example.net/x"}} {
		req := api.GenerateRequest{Class: api.Classes{"0"}, Webhook: ok.url}
		if _, err := ok.ts.client.Generate(t.Context(), req, 0); err != nil {
			t.Errorf("%s: %v", ok.url, err)
		}
	}
}

// The address actually dialled must be public: a name that resolves to a private address is
// refused when the call connects, and the delivery is given up. An IPv6 address embedding an
// IPv4 one is judged by that one too.
func TestWebhookDialRefusesPrivateAddresses(t *testing.T) {
	d := &deliverer{}
	for addr, public := range map[string]bool{"127.0.0.1:80": false, "10.1.2.3:443": false, "[::1]:80": false, "100.64.0.1:80": false,
		"169.254.169.254:80": false, "[fd00::1]:443": false, "8.8.8.8:443": true, "[2001:4860:4860::8888]:443": true,
		"[::ffff:169.254.169.254]:80":      false, // IPv4-mapped
		"[::a9fe:a9fe]:80":                 false, // IPv4-compatible 169.254.169.254
		"[64:ff9b::a9fe:a9fe]:80":          false, // NAT64 of 169.254.169.254
		"[64:ff9b::7f00:1]:80":             false, // NAT64 of 127.0.0.1
		"[64:ff9b::808:808]:443":           true,  // NAT64 of 8.8.8.8: how an IPv6-only network reaches it
		"[64:ff9b:1::a9fe:a9fe]:80":        false, // NAT64 for local use
		"[fec0::1]:80":                     false, // site-local
		"[2002:a9fe:a9fe::1]:80":           false, // 6to4 via 169.254.169.254
		"[2002:c0a8:101::1]:80":            false, // 6to4 via 192.168.1.1
		"[2002:808:808::1]:443":            true,  // 6to4 via 8.8.8.8
		"[2001:0:4136:e378::f5ff:fffe]:80": false, // Teredo, client 10.0.0.1 (inverted)
		"[2001:0:7f00:1::f7f7:f7f7]:80":    false, // Teredo, server 127.0.0.1
		"[2001:0:4136:e378::f7f7:f7f7]:80": true,  // Teredo, server 65.54.227.120, client 8.8.8.8
	} {
		err := d.checkDialled("tcp", addr, nil)
		if (err == nil) != public || (err != nil && !errors.Is(err, errHostNotAllowed)) {
			t.Errorf("%s: %v; want public %v", addr, err, public)
		}
	}
}

// With --webhook-hosts the dial check still holds: a listed name that resolves to loopback
// is refused, unless the list names the address itself as an IP (and its port, if it gives
// one).
func TestWebhookAllowListKeepsTheDialCheck(t *testing.T) {
	for _, c := range []struct {
		list, addr string
		allowed    bool
	}{
		{"localhost", "127.0.0.1:9000", false},
		{"hooks.example.com,*.internal.example", "10.0.0.7:443", false},
		{"hooks.example.com", "8.8.8.8:443", true},
		{"127.0.0.1", "127.0.0.1:9000", true},
		{"127.0.0.1:9000", "127.0.0.1:9000", true},
		{"127.0.0.1:9000", "127.0.0.1:9001", false},
		{"[::1]", "[::1]:80", true},
		{"10.0.0.7", "10.0.0.8:80", false},
	} {
		hosts, err := parseHostList(c.list)
		if err != nil {
			t.Fatal(err)
		}
		d := &deliverer{hosts: hosts}
		if err := d.checkDialled("tcp", c.addr, nil); (err == nil) != c.allowed {
			t.Errorf("--webhook-hosts %s, dialling %s: %v; want allowed %v", c.list, c.addr, err, c.allowed)
		}
	}
}

// End to end: a server whose --webhook-hosts lists the name localhost never calls it (it
// resolves to loopback); the delivery is given up saying why, and the receiver sees nothing.
func TestWebhookListedNameResolvingToLoopbackIsRefused(t *testing.T) {
	rc := newReceiver(t, func(string, int) int { return http.StatusOK })
	ts := start(t, "", false, func(c *Config) {
		webhooksOn(c)
		c.WebhookHosts = "localhost"
	})
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	req := api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "draft", Seed: seed(8), Webhook: "http://localhost:" + port + "/hook",
		WebhookEvents: []string{"succeeded"}}
	g, err := ts.client.Generate(t.Context(), req, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d := settled(t, ts, g.ID, 1).Deliveries[0]
	if d.State != "failed" || d.Attempts != 1 || !strings.Contains(d.LastError, "not public") || strings.Contains(d.LastError, "127.0.0.1") {
		t.Errorf("a call to a listed name resolving to loopback: %+v; want given up at once, naming no address", d)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if n := len(rc.tries); n != 0 {
		t.Errorf("the receiver was called %d times", n)
	}
}
