package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClassesAndGammaAcceptNumbersAndStrings(t *testing.T) {
	var r GenerateRequest
	if err := json.Unmarshal([]byte(`{"class":["sneaker",3],"gamma":"auto"}`), &r); err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.Class, ",") != "sneaker,3" || r.Gamma != "auto" {
		t.Fatalf("%+v", r)
	}
	if err := json.Unmarshal([]byte(`{"class":7,"gamma":4}`), &r); err != nil || strings.Join(r.Class, ",") != "7" || r.Gamma != "4" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{`{"class":1.5}`, `{"class":{}}`, `{"class":[true]}`, `{"gamma":[1]}`, `{"gamma":2.5}`} {
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestClientErrorsAndAuth(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/generations":
			if r.Header.Get("Authorization") != "Bearer tok" {
				t.Errorf("no token sent")
			}
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":"the queue is full; retry later"}`)
		case "/healthz":
			w.WriteHeader(502)
			fmt.Fprint(w, "bad gateway from a proxy")
		default:
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"n -1: out of range","field":"n"}`)
		}
	}))
	defer hs.Close()
	c, err := NewClient(hs.URL+"/", "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Generate(t.Context(), GenerateRequest{Class: Classes{"0"}}, time.Second)
	var e *Error
	if !errors.As(err, &e) || e.Status != 503 || e.RetryAfter != 7*time.Second || !strings.Contains(e.Error(), "queue is full") {
		t.Fatalf("%#v", err)
	}
	if err := c.Health(t.Context()); !IsStatus(err, 502) || !strings.Contains(err.Error(), "bad gateway") {
		t.Errorf("non-JSON error: %v", err)
	}
	_, err = c.Generation(t.Context(), "x")
	if !errors.As(err, &e) || e.Body.Field != "n" {
		t.Errorf("field: %v", err)
	}
	for _, bad := range []string{"", "localhost:8080", "ftp://x", "http://"} {
		if _, err := NewClient(bad, "", nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestEventsStream(t *testing.T) {
	stream := "event: generation\ndata: {\"type\":\"generation\",\"generation\":{\"id\":\"a\",\"status\":\"running\"}}\n\n" +
		": ping\n\n" +
		"event: progress\ndata: {\"type\":\"progress\",\"progress\":{\"images_done\":1,\"images_total\":2}}\n\n" +
		"event: done\ndata: {\"type\":\"done\",\"generation\":{\"id\":\"a\",\"status\":\"succeeded\"}}\n\n"
	cut := strings.Index(stream, "event: done")
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.Contains(r.URL.Path, "/short/") {
			fmt.Fprint(w, stream[:cut])
			return
		}
		fmt.Fprint(w, stream)
	}))
	defer hs.Close()
	c, _ := NewClient(hs.URL, "", nil)
	var types []string
	g, err := c.Events(t.Context(), "a", func(ev Event) error { types = append(types, ev.Type); return nil })
	if err != nil || g.Status != StatusSucceeded || strings.Join(types, ",") != "generation,progress,done" {
		t.Fatalf("%v %+v %v", types, g, err)
	}
	if _, err := c.Events(t.Context(), "short/x", nil); err == nil || !strings.Contains(err.Error(), "ended before") {
		t.Errorf("a stream cut short: %v", err)
	}
	stop := errors.New("stop")
	if _, err := c.Events(t.Context(), "a", func(Event) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("callback error: %v", err)
	}
}

// WithIdempotencyKey sends the header; Replayed reports the server's Idempotent-Replayed; a
// 429 gives its limit and Retry-After; ListOptions.Key and Keys reach their parameters.
func TestClientIdempotencyLimitsAndKeys(t *testing.T) {
	posts := 0
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.Header.Get("Idempotency-Key") == "k1":
			posts++
			if posts > 1 {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{"id":"j1","status":"queued","key":"alice","expires_in":60}`)
		case r.Method == http.MethodPost:
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":"key \"alice\" is over its rate limit","limit":"rate"}`)
		case r.URL.Path == "/v1/keys":
			fmt.Fprint(w, `{"you":"alice","keys":[{"name":"alice","max_in_flight":2}]}`)
		default:
			if r.URL.Query().Get("key") != "bob" {
				t.Errorf("list query %q", r.URL.RawQuery)
			}
			fmt.Fprint(w, `{"generations":[],"total":0}`)
		}
	}))
	defer hs.Close()
	c, err := NewClient(hs.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true} {
		g, err := c.Generate(t.Context(), GenerateRequest{Class: Classes{"0"}}, 0, WithIdempotencyKey("k1"))
		if err != nil || g.ID != "j1" || g.Replayed != want || g.Key != "alice" || g.ExpiresIn != 60 {
			t.Fatalf("POST %d: %+v %v", i+1, g, err)
		}
	}
	_, err = c.Generate(t.Context(), GenerateRequest{Class: Classes{"0"}}, 0)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Body.Limit != LimitRate || e.RetryAfter != 3*time.Second {
		t.Fatalf("429: %#v", err)
	}
	if k, err := c.Keys(t.Context()); err != nil || k.You != "alice" || k.Keys[0].MaxInFlight != 2 {
		t.Fatalf("keys: %+v %v", k, err)
	}
	if _, err := c.List(t.Context(), ListOptions{Key: "bob"}); err != nil {
		t.Fatal(err)
	}
}
