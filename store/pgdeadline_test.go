package store

import (
	"testing"
	"time"

	"marspec/api"
	"marspec/store/storetest"
)

func openPostgres(t *testing.T) *Postgres {
	t.Helper()
	p, err := OpenPostgres(storetest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// withPriority is job i (created i seconds after base) at priority p.
func withPriority(id string, i, p int) Job {
	j := job(id, i, api.StatusQueued, "target", 1)
	j.Request.Priority = &p
	return j
}

// Claims follow priority aged by waiting time: a job of priority p is claimed as if it had
// arrived p x aging earlier, so a higher priority passes only jobs that arrived less than the
// difference in levels x aging before it.
func TestPostgresClaimsByAgedPriority(t *testing.T) {
	p := openPostgres(t)
	p.SetPriorityAging(10 * time.Second)
	mustCreate(t, p,
		withPriority("old-low", 0, -10),                  // rank 100 s: as if it came 100 s later
		withPriority("normal", 50, 0),                    // rank 50 s
		withPriority("urgent", 60, 5),                    // rank 10 s: passes normal, which came 10 s before it
		withPriority("later-top", 195, 10),               // rank 95 s: passes old-low, which came less than 20 levels x 10 s before it
		withPriority("too-late-top", 205, 10),            // rank 105 s: old-low came more than 200 s before it: it goes first
		job("plain", 101, api.StatusQueued, "target", 1), // rank 101 s
	)
	var order []string
	for {
		j, ok, err := p.Claim("A", time.Minute, "cancelled")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		order = append(order, j.ID)
	}
	want := []string{"urgent", "normal", "later-top", "old-low", "plain", "too-late-top"}
	if len(order) != len(want) {
		t.Fatalf("claimed %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("claimed %v, want %v", order, want)
		}
	}
}

// A job that has not started by its deadline fails, whether or not anyone claims: by the
// sweep, and before any claim; a started job, a held one and a cancelled one are left alone.
func TestPostgresQueueDeadlines(t *testing.T) {
	p := openPostgres(t)
	now := time.Now().UTC()
	timed := func(id string, ago, timeout float64) Job {
		j := job(id, 0, api.StatusQueued, "target", 1)
		j.Created = now.Add(-time.Duration(ago * float64(time.Second)))
		j.Request.QueueTimeout = &timeout
		return j
	}
	mustCreate(t, p, timed("expired", 10, 5), timed("in-time", 10, 60), job("no-deadline", 0, api.StatusQueued, "target", 1),
		timed("started", 10, 5), timed("held", 10, 5), timed("cancel-asked", 10, 5), timed("at-claim", 10, 5))
	if err := p.SetRunning("started", now.Add(-8*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := p.AskCancel("cancel-asked"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.exec(`UPDATE jobs SET owner = 'B', lease_until = now() + interval '1 minute' WHERE id IN ('held', 'started')`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.exec(`UPDATE jobs SET queue_deadline = 0 WHERE FALSE`); err == nil {
		t.Fatal("queue_deadline is derived from the request; writing it must be refused")
	}
	ids, err := p.ExpireQueued(now, QueueDeadlineReason)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, id := range ids {
		failed[id] = true
	}
	if len(ids) != 2 || !failed["expired"] || !failed["at-claim"] {
		t.Fatalf("expired %v, want expired and at-claim", ids)
	}
	j, err := p.Job("expired")
	if err != nil || j.Status != api.StatusFailed || j.Error != QueueDeadlineReason || j.Finished == nil {
		t.Fatalf("expired job: %+v, %v", j, err)
	}
	// a claim fails an expired job first, and never hands it out
	mustCreate(t, p, timed("late", 3, 1))
	for {
		c, ok, err := p.Claim("A", time.Minute, "cancelled")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if c.ID == "late" {
			t.Fatal("an expired job was claimed")
		}
	}
	if j, _ := p.Job("late"); j.Status != api.StatusFailed {
		t.Fatalf("late job after a claim: %s", j.Status)
	}
}
