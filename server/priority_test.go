package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"marspec/api"
)

// The Aim of priorities: a high-priority job posted behind 100 low-priority ones starts within
// one batch: of the low jobs not started when it was posted, at most one batch per server
// starts before it (images in flight keep their slots; nothing queued goes first).

func lowAndHigh(p int) api.GenerateRequest {
	return api.GenerateRequest{Class: api.Classes{"0"}, N: 1, Mode: "target", Seed: seed(7), Priority: &p}
}

// behindHundred posts 100 low-priority jobs round-robin to servers, then one high-priority
// job, and checks when it started against when the others did. hold, if set, is called
// before the low jobs are posted and its release after, so they queue up together.
func behindHundred(t *testing.T, servers []*testServer, hold func() (release func())) {
	t.Helper()
	release := func() {}
	if hold != nil {
		release = hold()
	}
	var low []string
	for i := range 100 {
		g, err := servers[i%len(servers)].client.Generate(t.Context(), lowAndHigh(-5), 0)
		if err != nil {
			t.Fatalf("low job %d: %v", i, err)
		}
		low = append(low, g.ID)
	}
	release()
	time.Sleep(20 * time.Millisecond) // the first batch is under way
	high, err := servers[0].client.Generate(t.Context(), lowAndHigh(10), 0)
	if err != nil {
		t.Fatal(err)
	}
	h := servers[0].waitEnd(t, high.ID)
	if h.Status != api.StatusSucceeded || h.Started == nil || h.Priority != 10 {
		t.Fatalf("high job: %s %q started %v priority %d", h.Status, h.Error, h.Started, h.Priority)
	}
	waitingAtPost, passed := 0, 0
	for _, id := range low {
		g := servers[0].waitEnd(t, id)
		if g.Started == nil || g.Status != api.StatusSucceeded {
			t.Fatalf("low job %s: %s %q", id, g.Status, g.Error)
		}
		if !g.Started.Before(h.Created) {
			waitingAtPost++
			if g.Started.Before(*h.Started) {
				passed++
			}
		}
	}
	t.Logf("low jobs not started when the high one was posted: %d; of them started before it: %d (one batch: %d images per server)",
		waitingAtPost, passed, servers[0].cfg.MaxBatch)
	if waitingAtPost < 50 {
		t.Fatalf("only %d low jobs were still waiting when the high one was posted: the test shows nothing", waitingAtPost)
	}
	if passed > len(servers)*servers[0].cfg.MaxBatch {
		t.Errorf("%d low jobs started after the high one was posted and before it: more than one batch per server", passed)
	}
}

// slowStores makes each stored image take a while, so the queue cannot drain while the test
// posts (the analytic models are fast).
func slowStores(ts *testServer, d time.Duration) { ts.afterImage = func(string, int) { time.Sleep(d) } }

func TestHighPriorityStartsWithinOneBatch(t *testing.T) {
	ts := start(t, "", false, func(c *Config) { c.QueueSize = 200 })
	slowStores(ts, 15*time.Millisecond)
	behindHundred(t, []*testServer{ts}, ts.sched.Hold)
}

func TestReplicasHighPriorityStartsWithinOneBatch(t *testing.T) {
	sh := newShared(t, "s3")
	big := func(c *Config) { c.QueueSize = 200 }
	a, b := sh.replica(t, false, big), sh.replica(t, false, big)
	slowStores(a, 100*time.Millisecond) // posting to PostgreSQL is slower (an admission counts the queue under a lock): more time to post them all
	slowStores(b, 100*time.Millisecond)
	behindHundred(t, []*testServer{a, b}, nil)
}

// Bad priorities and queue timeouts are 400s naming the field and what is allowed; the
// server's default queue timeout is stored with a request that gives none.
func TestPriorityAndQueueTimeoutChecked(t *testing.T) {
	ts := start(t, "", false, func(c *Config) { c.QueueTimeout = time.Minute; c.MaxQueueTimeout = time.Hour })
	for _, c := range []struct{ body, field, want string }{
		{`{"class":0,"priority":11}`, "priority", "from -10 (last) to 10 (first)"},
		{`{"class":0,"priority":-11}`, "priority", "from -10"},
		{`{"class":0,"priority":1.5}`, "priority", "integer"},
		{`{"class":0,"priority":"high"}`, "priority", "integer"},
		{`{"class":0,"queue_timeout":0}`, "queue_timeout", "above 0, at most 3600"},
		{`{"class":0,"queue_timeout":-3}`, "queue_timeout", "above 0"},
		{`{"class":0,"queue_timeout":3601}`, "queue_timeout", "--max-queue-timeout"},
	} {
		a := ts.call(t, "POST", "/v1/generations", c.body)
		var e api.ErrorBody
		_ = json.Unmarshal(a.body, &e)
		if a.code != 400 || e.Field != c.field || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s: %d %+v, want 400 on %s saying %q", c.body, a.code, e, c.field, c.want)
		}
	}
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.QueueDeadline == nil || g.QueueDeadline.Sub(g.Created) != time.Minute || g.Priority != 0 {
		t.Errorf("default queue deadline: %v (created %v), priority %d", g.QueueDeadline, g.Created, g.Priority)
	}
	// a server without keys lets anyone ask the top priority, as before keys
	if g, err := ts.client.Generate(t.Context(), lowAndHigh(10), 0); err != nil || g.Priority != 10 {
		t.Errorf("priority 10 on a server without keys: %+v %v", g, err)
	}
}
