package server

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
)

// A failed webhook call is described without the URL's query and without the addresses Go's
// errors carry (the one dialled, the resolver's): in the job's deliveries and in the log.

// A call to a closed port and one to a receiver that never answers are given up with
// "POST URL-without-query: connection refused" and "…: timeout after 500ms"; neither the
// token in the query nor Go's "dial tcp" wording reaches the job or the log.
func TestWebhookFailureShowsNoQueryNorAddress(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + closed.Addr().String() + "/hook"
	closed.Close() // nothing listens there now: the connection is refused
	hangs := newReceiver(t, func(string, int) int { return 0 })
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	webhooksOn(&cfg)
	cfg.WebhookAttempts = 1
	log := &logBuffer{}
	ts := startLogged(t, st, dir, false, cfg, log)
	for hook, want := range map[string]string{
		refusedURL + "?token=s3cret":              "POST " + refusedURL + ": connection refused",
		hangs.URL + "/hooks/marspec?token=s3cret": "POST " + hangs.URL + "/hooks/marspec: timeout after 500ms",
	} {
		req := api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "draft", Seed: seed(7), Webhook: hook, WebhookEvents: []string{"succeeded"}}
		g, err := ts.client.Generate(t.Context(), req, 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if d := settled(t, ts, g.ID, 1).Deliveries[0]; d.State != "failed" || d.LastError != want {
			t.Errorf("%s: %s with last_error %q; want failed with %q", hook, d.State, d.LastError, want)
		}
	}
	text := log.String()
	if !strings.Contains(text, "giving up") {
		t.Fatal("no give-up logged")
	}
	for _, line := range strings.Split(text, "\n") {
		for _, leak := range []string{"s3cret", "dial tcp", "Client.Timeout"} {
			if strings.Contains(line, leak) {
				t.Errorf("the log shows %q: %s", leak, line)
			}
		}
	}
}

// Each kind of failure the HTTP client reports, wrapped as it wraps them, is named by its kind
// alone: no query, no dialled or resolver address.
func TestWebhookFailureDescriptions(t *testing.T) {
	const hook = "https://hooks.example.com/in?token=s3cret"
	wrap := func(inner error) error {
		return &url.Error{Op: "Post", URL: hook, Err: &net.OpError{Op: "dial", Net: "tcp",
			Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 443}, Err: inner}}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{wrap(&net.DNSError{Err: "no such host", Name: "hooks.example.com", Server: "10.0.0.53:53", IsNotFound: true}), "host not found"},
		{wrap(&net.DNSError{Err: "server misbehaving", Name: "hooks.example.com", Server: "10.0.0.53:53"}), "the host's name could not be resolved"},
		{wrap(errDialPrivate), errDialPrivate.reason},
		{&url.Error{Op: "Post", URL: hook, Err: &http.MaxBytesError{Limit: 1}}, "no answer (http: request body too large)"},
	} {
		got := callFailure(hook, c.err, 10*time.Second)
		if got != "POST https://hooks.example.com/in: "+c.want {
			t.Errorf("%v:\n got %q\nwant %q", c.err, got, "POST https://hooks.example.com/in: "+c.want)
		}
		for _, leak := range []string{"s3cret", "10.1.2.3", "10.0.0.53"} {
			if strings.Contains(got, leak) {
				t.Errorf("%q shows %s", got, leak)
			}
		}
	}
}
