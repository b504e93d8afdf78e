package server

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"marspec/api"
)

// The Aim of webhooks: a webhook is delivered exactly as signed after kill -9 of the owning
// replica. Replica A runs the job and is calling its "started" webhook (the receiver holds
// the call) when it dies mid-run; B takes the job over when A's lease runs out and finishes
// it, and delivers both events: "started" when A's claim on that delivery runs out, with the
// very bytes A had signed, and "succeeded" from its own run. Database in PostgreSQL, images
// in S3, the receiver on loopback; every call is checked with the documented recipe.
func TestReplicaWebhookDeliveredAfterKill(t *testing.T) {
	sh := newShared(t, "s3")
	rc := newReceiver(t, func(id string, n int) int {
		if strings.HasSuffix(id, ":started") && n == 1 {
			return 0 // A's call hangs: A dies before an answer comes
		}
		return http.StatusOK
	})
	a := sh.replica(t, false, webhooksOn)
	midRun := make(chan struct{}, 1)
	hold := make(chan struct{})
	a.afterImage = func(string, int) { midRun <- struct{}{}; <-hold }
	req := api.GenerateRequest{Class: api.Classes{"1", "2"}, N: 1, Mode: "target", Seed: seed(11), Webhook: rc.hookURL()}
	g, err := a.client.Generate(t.Context(), req, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, midRun, "A mid-run")
	first := receive(t, rc.hung, "A's call of the started webhook")
	if first.err != nil {
		t.Fatalf("A's call: %v", first.err)
	}
	b := sh.replica(t, false, webhooksOn)
	killed := time.Now()
	a.crash(t)
	t.Cleanup(func() { close(hold) }) // A's run wakes when the test ends and writes late: fenced off

	calls := expectCalls(t, rc, g.ID, api.EventStarted, api.EventSucceeded)
	t.Logf("both webhooks delivered by B %v after the kill (job lease 1 s, delivery lease 1 s)", time.Since(killed).Round(time.Millisecond))
	started, done := calls[api.EventStarted], calls[api.EventSucceeded]
	if !bytes.Equal(started.body, first.body) {
		t.Errorf("B's started call is not the body A signed:\n A: %s\n B: %s", first.body, started.body)
	}
	if started.header.Get(api.HeaderWebhookTimestamp) == "" || started.payload.Generation.Status != api.StatusRunning {
		t.Errorf("started payload: %+v", started.payload)
	}
	if done.payload.Generation.Status != api.StatusSucceeded || len(done.payload.Generation.Images) != 2 {
		t.Errorf("succeeded payload: %s with %d images", done.payload.Generation.Status, len(done.payload.Generation.Images))
	}
	w := settled(t, b, g.ID, 2)
	for _, d := range w.Deliveries {
		want := 1
		if d.Event == api.EventStarted {
			want = 2 // A's try, then B's
		}
		if d.State != "delivered" || d.Attempts != want || d.LastStatus != 200 {
			t.Errorf("delivery %+v, want delivered on try %d", d, want)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.calls) != 2 {
		t.Errorf("%d calls answered 2xx, want 2 (one per event)", len(rc.calls))
	}
}
