package server

import (
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
)

// A job whose image the store check's repair found missing is put back to the queue, made
// again at the next start, and its webhook told of that new end once, under an id of its own
// (the outbox used to drop it as a second "succeeded" of the job).
func TestWebhookTellsAnEndAfterARepair(t *testing.T) {
	rc := newReceiver(t, func(string, int) int { return 200 })
	dir := t.TempDir()
	ts := start(t, dir, false, webhooksOn)
	req := api.GenerateRequest{Class: api.Classes{"2"}, N: 2, Mode: "target", Seed: seed(5), Webhook: rc.hookURL(), WebhookEvents: []string{"succeeded"}}
	g, err := ts.client.Generate(t.Context(), req, 10*time.Second)
	if err != nil || g.Status != api.StatusSucceeded {
		t.Fatalf("job: %+v, %v", g, err)
	}
	expectCalls(t, rc, g.ID, api.EventSucceeded)
	settled(t, ts, g.ID, 1)
	ts.stop(t)
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Blobs.Delete(g.ID + "/1.png"); err != nil { // its bytes lost
		t.Fatal(err)
	}
	o, err := st.Check(0)
	if err != nil || len(o.RecordsWithoutObject) != 1 {
		t.Fatalf("check: %+v %v", o, err)
	}
	if err := st.Repair(o); err != nil {
		t.Fatal(err)
	}
	st.Close()
	again := start(t, dir, false, webhooksOn)
	if resumed, _, err := again.Resume(); err != nil || resumed != 1 { // the lost image is made again
		t.Fatalf("resumed %d jobs: %v", resumed, err)
	}
	c := receive(t, rc.got, "the webhook of the end after the repair")
	if c.err != nil || c.id != g.ID+":succeeded:2" || c.payload.ID != c.id || c.payload.Event != api.EventSucceeded ||
		c.payload.Generation.Status != api.StatusSucceeded || len(c.payload.Generation.Images) != 2 {
		t.Fatalf("call %s (%v): %+v", c.id, c.err, c.payload)
	}
	if d := settled(t, again, g.ID, 2).Deliveries; d[1].State != "delivered" {
		t.Errorf("deliveries: %+v", d)
	}
	select {
	case c := <-rc.got:
		t.Errorf("another call: %s", c.id)
	case <-time.After(300 * time.Millisecond):
	}
}
