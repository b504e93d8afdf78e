package server

import (
	"net/http"
	"testing"
	"time"

	"marspec/api"
)

// One key's receiver that hangs holds at most webhookPerKey of a server's calls: another
// key's webhook is delivered meanwhile, and the slow key's next call waits for one of its own
// to end. On SQLite and on a PostgreSQL + S3 replica.
func TestWebhookSlowReceiverHoldsOnlyItsKeysCalls(t *testing.T) {
	edit := func(c *Config) {
		webhooksOn(c)
		withKeys(c)
		c.WebhookTimeout = time.Minute // the hung calls outlast the test; stopping the server ends them
	}
	t.Run("sqlite", func(t *testing.T) {
		slowKeyHoldsItsOwnCalls(t, func() *testServer { return start(t, "", false, edit) })
	})
	t.Run("postgres+s3", func(t *testing.T) {
		sh := newShared(t, "s3")
		slowKeyHoldsItsOwnCalls(t, func() *testServer { return sh.replica(t, false, edit) })
	})
}

func slowKeyHoldsItsOwnCalls(t *testing.T, open func() *testServer) {
	slow := newReceiver(t, func(string, int) int { return 0 })
	fast := newReceiver(t, func(string, int) int { return http.StatusNoContent })
	ts := keyed(t, open()) // stopped before the receivers close: its hung calls end with it
	bob := ts.as(t, bobSecret)
	var bobs []string
	for i := range webhookPerKey + 1 {
		req := api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "draft", Seed: seed(uint64(30 + i)), Webhook: slow.hookURL(),
			WebhookEvents: []string{"succeeded"}}
		g, err := bob.Generate(t.Context(), req, 0)
		if err != nil {
			t.Fatal(err)
		}
		bobs = append(bobs, g.ID)
	}
	for _, id := range bobs {
		ts.waitEnd(t, id)
	}
	for range webhookPerKey {
		receive(t, slow.hung, "bob's calls")
	}
	// the admin key's webhook, due after every one of bob's, is called while bob's hang
	req := api.GenerateRequest{Class: api.Classes{"2"}, N: 1, Mode: "draft", Seed: seed(40), Webhook: fast.hookURL(), WebhookEvents: []string{"succeeded"}}
	g, err := ts.client.Generate(t.Context(), req, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expectCalls(t, fast, g.ID, api.EventSucceeded)
	waiting := 0
	for _, id := range bobs {
		ds, err := ts.hooks.outbox.DeliveriesOf(id)
		if err != nil || len(ds) != 1 {
			t.Fatalf("job %s: %+v %v", id, ds, err)
		}
		if ds[0].Attempts == 0 {
			waiting++
		}
	}
	if waiting != 1 {
		t.Errorf("%d of bob's %d calls not begun; want 1 (bob holds %d at most)", waiting, len(bobs), webhookPerKey)
	}
}
