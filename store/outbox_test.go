package store

import (
	"slices"
	"testing"
	"time"

	"marspec/api"
)

// The webhook outbox on both stores: a status change of a job that asked for a webhook writes
// its delivery in the same statement, a delivery is claimed once per lease, and a deliverer
// whose claim was taken over writes nothing.

// hooked is job i with a webhook for events (nil: every event).
func hooked(id string, i int, events ...string) Job {
	j := job(id, i, api.StatusQueued, "target", 1)
	j.Request.Webhook = "http://127.0.0.1:9/hook"
	j.Request.WebhookEvents = events
	return j
}

func TestOutboxConformance(t *testing.T) {
	for _, impl := range metas {
		t.Run(impl.name, func(t *testing.T) {
			for _, c := range []struct {
				name string
				run  func(t *testing.T, m Meta, o Outbox)
			}{
				{"status changes write deliveries", caseOutboxWrites},
				{"claims are leased and fenced", caseOutboxLeases},
				{"retries and giving up", caseOutboxRetries},
				{"an expired job waits for its deliveries", caseOutboxKeepsExpired},
				{"at most perKey of one key's deliveries held", caseOutboxPerKey},
				{"an end after a re-run is a new delivery", caseOutboxRerun},
			} {
				t.Run(c.name, func(t *testing.T) {
					m := impl.open(t)
					defer m.Close()
					c.run(t, m, m.(Outbox))
				})
			}
		})
	}
}

func events(t *testing.T, o Outbox, job string) []string {
	t.Helper()
	ds, err := o.DeliveriesOf(job)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, d.Event+"/"+d.Status)
	}
	return out
}

func caseOutboxWrites(t *testing.T, m Meta, o Outbox) {
	plain := job("plain", 0, api.StatusQueued, "target", 1)
	mustCreate(t, m, hooked("all", 1), hooked("ends", 2, "failed", "succeeded"), plain)
	for _, id := range []string{"all", "ends", "plain"} {
		if err := m.SetRunning(id, base.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := m.SetRunning(id, base.Add(2*time.Minute)); err != nil { // running again: no second start
			t.Fatal(err)
		}
		if err := m.Finish(id, api.StatusFailed, "broken", base.Add(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(id, api.StatusCancelled, "late", base.Add(4*time.Minute)); err != nil { // ended already: no event
			t.Fatal(err)
		}
	}
	if got := events(t, o, "all"); len(got) != 2 || got[0] != "started/running" || got[1] != "failed/failed" {
		t.Errorf("every event: %v, want started then failed", got)
	}
	if got := events(t, o, "ends"); len(got) != 1 || got[0] != "failed/failed" {
		t.Errorf("ends only: %v", got)
	}
	if got := events(t, o, "plain"); len(got) != 0 {
		t.Errorf("a job without a webhook: %v", got)
	}
	ds, _ := o.DeliveriesOf("all")
	_, shared := m.(Queue) // PostgreSQL stamps the end with its own clock
	if d := ds[1]; d.Error != "broken" || d.URL != "http://127.0.0.1:9/hook" || d.State != DeliveryPending || d.Finished == nil ||
		!d.Created.Equal(*d.Finished) || (!shared && !d.Created.Equal(base.Add(3*time.Minute))) ||
		d.Started == nil || !d.Started.Equal(base.Add(time.Minute)) {
		t.Errorf("the failed event: %+v", d)
	}
	if n, err := o.PendingDeliveries(); err != nil || n != 3 {
		t.Errorf("pending: %d, %v", n, err)
	}
	if err := m.DeleteJob("all"); err != nil {
		t.Fatal(err)
	}
	if got := events(t, o, "all"); len(got) != 0 {
		t.Errorf("a deleted job's deliveries stay: %v", got)
	}
}

func caseOutboxLeases(t *testing.T, m Meta, o Outbox) {
	mustCreate(t, m, hooked("a", 1))
	if err := m.Finish("a", api.StatusSucceeded, "", base); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	got, err := o.ClaimDeliveries("one", 300*time.Millisecond, now, 10, 10)
	if err != nil || len(got) != 1 || got[0].Attempts != 1 || got[0].Body != nil {
		t.Fatalf("claim: %+v, %v", got, err)
	}
	if again, err := o.ClaimDeliveries("two", time.Minute, now, 10, 10); err != nil || len(again) != 0 {
		t.Fatalf("claimed twice within the lease: %+v, %v", again, err)
	}
	first := got[0].Hold("one")
	body, err := o.FreezeBody(first, []byte(`{"first":1}`))
	if err != nil || string(body) != `{"first":1}` {
		t.Fatalf("freeze: %q, %v", body, err)
	}
	time.Sleep(400 * time.Millisecond) // the lease runs out: "one" was killed
	taken, err := o.ClaimDeliveries("two", time.Minute, time.Now(), 10, 10)
	if err != nil || len(taken) != 1 || taken[0].Attempts != 2 || string(taken[0].Body) != `{"first":1}` {
		t.Fatalf("claim after the lease: %+v, %v", taken, err)
	}
	if ok, err := o.Delivered(first, 200, time.Now()); err != nil || ok {
		t.Fatalf("the first claim wrote after losing its lease: %v, %v", ok, err)
	}
	second := taken[0].Hold("two")
	if body, err := o.FreezeBody(second, []byte(`{"second":2}`)); err != nil || string(body) != `{"first":1}` {
		t.Fatalf("a retry's body: %q, %v", body, err)
	}
	if ok, err := o.Delivered(second, 204, time.Now()); err != nil || !ok {
		t.Fatalf("delivered: %v, %v", ok, err)
	}
	ds, _ := o.DeliveriesOf("a")
	if d := ds[0]; d.State != DeliveryDelivered || d.LastStatus != 204 || d.Delivered == nil || d.Attempts != 2 {
		t.Errorf("after delivery: %+v", d)
	}
	if n, _ := o.PendingDeliveries(); n != 0 {
		t.Errorf("pending after delivery: %d", n)
	}
}

func caseOutboxRetries(t *testing.T, m Meta, o Outbox) {
	mustCreate(t, m, hooked("r", 1, "cancelled"))
	if err := m.Finish("r", api.StatusCancelled, "asked", base); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	got, _ := o.ClaimDeliveries("one", time.Minute, now, 10, 10)
	if len(got) != 1 {
		t.Fatalf("claim: %+v", got)
	}
	if ok, err := o.DeliveryFailed(got[0].Hold("one"), 500, "answered 500", now.Add(time.Hour), false); err != nil || !ok {
		t.Fatalf("failed attempt: %v, %v", ok, err)
	}
	if early, _ := o.ClaimDeliveries("one", time.Minute, now.Add(time.Minute), 10, 10); len(early) != 0 {
		t.Fatalf("claimed before its next attempt: %+v", early)
	}
	later, _ := o.ClaimDeliveries("one", time.Minute, now.Add(2*time.Hour), 10, 10)
	if len(later) != 1 || later[0].Attempts != 2 || later[0].LastStatus != 500 || later[0].LastError != "answered 500" {
		t.Fatalf("the retry: %+v", later)
	}
	if ok, err := o.DeliveryFailed(later[0].Hold("one"), 0, "connection refused", time.Time{}, true); err != nil || !ok {
		t.Fatalf("giving up: %v, %v", ok, err)
	}
	if none, _ := o.ClaimDeliveries("one", time.Minute, now.Add(100*time.Hour), 10, 10); len(none) != 0 {
		t.Fatalf("claimed after giving up: %+v", none)
	}
	ds, _ := o.DeliveriesOf("r")
	if d := ds[0]; d.State != DeliveryFailed || d.LastError != "connection refused" || d.Attempts != 2 {
		t.Errorf("given up: %+v", d)
	}
}

// A job past its retention is not offered to the sweep while a delivery of it is pending
// (deleting the job would drop the delivery), and is once the delivery is given up.
func caseOutboxKeepsExpired(t *testing.T, m Meta, o Outbox) {
	j := hooked("kept", 1, "succeeded")
	j.Retain = time.Second
	mustCreate(t, m, j)
	if err := m.Finish("kept", api.StatusSucceeded, "", base); err != nil {
		t.Fatal(err)
	}
	h := m.(Hosted)
	later := time.Now().Add(time.Hour) // past the end on either clock (PostgreSQL stamps it with its own)
	if got, err := h.Expired(later, 10); err != nil || len(got) != 0 {
		t.Fatalf("expired with a delivery pending: %v %v; want none", ids(got), err)
	}
	got, _ := o.ClaimDeliveries("one", time.Minute, time.Now(), 10, 10)
	if len(got) != 1 {
		t.Fatalf("claim: %+v", got)
	}
	if ok, err := o.DeliveryFailed(got[0].Hold("one"), 0, "connection refused", time.Now(), true); err != nil || !ok {
		t.Fatalf("giving up: %v, %v", ok, err)
	}
	if got, err := h.Expired(later, 10); err != nil || len(got) != 1 || got[0].ID != "kept" {
		t.Errorf("expired once the delivery was given up: %v %v; want kept", ids(got), err)
	}
}

// An owner holds at most perKey of one key's deliveries at once: another key's are claimed
// beside them, and the key's next one once one of its calls has been recorded; another owner
// has a bound of its own.
func caseOutboxPerKey(t *testing.T, m Meta, o Outbox) {
	ids := []string{"a1", "a2", "a3", "a4", "b1"}
	for i, id := range ids {
		j := hooked(id, i, "succeeded")
		j.Key = map[byte]string{'a': "alice", 'b': "bob"}[id[0]]
		mustCreate(t, m, j)
		if err := m.Finish(id, api.StatusSucceeded, "", base.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(owner string) []string {
		t.Helper()
		got, err := o.ClaimDeliveries(owner, time.Minute, time.Now(), 10, 2)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range got {
			out = append(out, d.JobID)
		}
		slices.Sort(out)
		return out
	}
	first := claim("one")
	if !slices.Equal(first, []string{"a1", "a2", "b1"}) {
		t.Fatalf("the first claim: %v; want alice's two oldest and bob's", first)
	}
	if got := claim("one"); len(got) != 0 {
		t.Fatalf("claimed past alice's bound: %v", got)
	}
	ds, _ := o.DeliveriesOf("a1")
	if ok, err := o.Delivered(ds[0].Hold("one"), 200, time.Now()); err != nil || !ok {
		t.Fatalf("delivered: %v %v", ok, err)
	}
	if got := claim("one"); !slices.Equal(got, []string{"a3"}) {
		t.Fatalf("after one of alice's calls ended: %v; want a3", got)
	}
	if got := claim("two"); !slices.Equal(got, []string{"a4"}) {
		t.Fatalf("another owner: %v; want a4", got)
	}
}

// A job the store check's repair put back to the queue runs and ends again: that end is a
// delivery of its own, under a new id (a receiver deduplicating by id would drop the old one
// sent again), and there is one such delivery per end.
func caseOutboxRerun(t *testing.T, m Meta, o Outbox) {
	mustCreate(t, m, hooked("rerun", 1))
	if err := m.SetRunning("rerun", base.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // ended, requeued by the repair, run and ended again, twice
		if err := m.Finish("rerun", api.StatusSucceeded, "", base.Add(time.Duration(2+i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			break
		}
		if err := m.Requeue("rerun"); err != nil {
			t.Fatal(err)
		}
		if err := m.SetRunning("rerun", base.Add(time.Duration(2+i)*time.Minute+time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := o.DeliveriesOf("rerun")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.ID)
	}
	if want := []string{"rerun:started", "rerun:succeeded", "rerun:succeeded:2", "rerun:succeeded:3"}; !slices.Equal(got, want) {
		t.Errorf("deliveries %v, want %v", got, want)
	}
	if j, err := m.Job("rerun"); len(ds) == 4 && (err != nil || ds[3].Finished == nil || j.Finished == nil || !ds[3].Finished.Equal(*j.Finished)) {
		t.Errorf("the last end's delivery carries finished %v, want the job's last end (%v)", ds[3].Finished, err)
	}
}
