package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/store/storetest"
)

// Hosted (keys, idempotency, retention) against every Meta, as the conformance suite runs.

var hostedCases = []struct {
	name string
	run  func(t *testing.T, m Meta)
}{
	{"hosted columns round trip", caseHostedRoundTrip},
	{"idempotency key returns the first job", caseAdmitIdempotent},
	{"in-flight limit per key", caseAdmitInFlight},
	{"expired jobs: listed for the sweep, left out of pages", caseExpired},
}

func TestHostedConformance(t *testing.T) {
	for _, impl := range metas {
		t.Run(impl.name, func(t *testing.T) {
			for _, c := range hostedCases {
				t.Run(c.name, func(t *testing.T) {
					m := impl.open(t)
					defer m.Close()
					c.run(t, m)
				})
			}
		})
	}
}

// finished is a job that ended at base plus end, kept for retain after.
func finished(id string, end, retain time.Duration) Job {
	j := job(id, 0, api.StatusSucceeded, "target", 1)
	at := base.Add(end)
	j.Finished, j.Retain = &at, retain
	return j
}

func caseHostedRoundTrip(t *testing.T, m Meta) {
	in := finished("a", time.Minute, 90*time.Second)
	in.Key, in.IdempotencyKey, in.RequestHash = "alice", "retry-1", "hash"
	mustCreate(t, m, in, job("b", 1, api.StatusQueued, "target", 1))
	got, err := m.Job("a")
	if err != nil || got.Key != "alice" || got.IdempotencyKey != "retry-1" || got.RequestHash != "hash" || got.Retain != 90*time.Second {
		t.Fatalf("stored %+v, read %+v (%v)", in, got, err)
	}
	if exp := got.ExpiresAt(); exp == nil || !exp.Equal(base.Add(time.Minute+90*time.Second)) {
		t.Errorf("expires at %v", exp)
	}
	if b, _ := m.Job("b"); b.Key != "" || b.IdempotencyKey != "" || b.Retain != 0 || b.ExpiresAt() != nil {
		t.Errorf("a job without key, Idempotency-Key or retention reads %+v", b)
	}
}

func caseAdmitIdempotent(t *testing.T, m Meta) {
	first := job("a", 0, api.StatusQueued, "target", 1)
	first.Key, first.IdempotencyKey, first.RequestHash = "alice", "k1", "h1"
	got, replayed, err := m.Admit(first, Limits{})
	if err != nil || replayed || got.ID != "a" {
		t.Fatalf("first admission: %s replayed %v, %v", got.ID, replayed, err)
	}
	again := job("b", 1, api.StatusQueued, "target", 1)
	again.Key, again.IdempotencyKey, again.RequestHash = "alice", "k1", "h2"
	got, replayed, err = m.Admit(again, Limits{})
	if err != nil || !replayed || got.ID != "a" || got.RequestHash != "h1" {
		t.Fatalf("the same key again: %s (hash %s) replayed %v, %v; want a, h1, replayed", got.ID, got.RequestHash, replayed, err)
	}
	other := again
	other.Key = "bob" // Idempotency-Keys are scoped per API key
	if got, replayed, err = m.Admit(other, Limits{}); err != nil || replayed || got.ID != "b" {
		t.Fatalf("another API key with the same Idempotency-Key: %s replayed %v, %v", got.ID, replayed, err)
	}
	// a job that ended and expired frees its Idempotency-Key: the key makes a new job
	expired := finished("d", 0, time.Hour)
	expired.Key, expired.IdempotencyKey = "carol", "k9"
	mustCreate(t, m, expired)
	late := job("e", 0, api.StatusQueued, "target", 1)
	late.Key, late.IdempotencyKey, late.Created = "carol", "k9", base.Add(2*time.Hour)
	if got, replayed, err = m.Admit(late, Limits{}); err != nil || replayed || got.ID != "e" {
		t.Fatalf("the Idempotency-Key of an expired job: %s replayed %v, %v; want a new job", got.ID, replayed, err)
	}
	if d, _ := m.Job("d"); d.IdempotencyKey != "" {
		t.Errorf("the expired job still holds its Idempotency-Key %q", d.IdempotencyKey)
	}
}

func caseAdmitInFlight(t *testing.T, m Meta) {
	admit := func(id, key string) error {
		j := job(id, 0, api.StatusQueued, "target", 1)
		j.Key = key
		_, _, err := m.Admit(j, Limits{MaxInFlight: 2})
		return err
	}
	for _, id := range []string{"a", "b"} {
		if err := admit(id, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	var limit *InFlightError
	if err := admit("c", "alice"); !errors.As(err, &limit) || limit.Limit != 2 || limit.Key != "alice" {
		t.Fatalf("a third job in flight: %v", err)
	}
	if err := admit("d", "bob"); err != nil {
		t.Fatalf("another key at the same time: %v", err)
	}
	if err := m.Finish("a", api.StatusSucceeded, "", base); err != nil {
		t.Fatal(err)
	}
	if err := admit("c", "alice"); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
}

func caseExpired(t *testing.T, m Meta) {
	gone := finished("gone", 0, time.Hour)     // expires at base+1h
	later := finished("later", 0, 3*time.Hour) // at base+3h
	forever := finished("forever", 0, 0)       // never
	running := job("running", 1, api.StatusRunning, "target", 1)
	running.Retain = time.Second                     // never while it runs
	requeued := finished("requeued", 0, time.Second) // put back by the store check: runs again
	requeued.Status = api.StatusQueued
	mustCreate(t, m, gone, later, forever, running, requeued)
	at := base.Add(2 * time.Hour)
	got, err := m.Expired(at, 10)
	if err != nil || !slices.Equal(ids(got), []string{"gone"}) {
		t.Fatalf("expired at base+2h: %v %v", ids(got), err)
	}
	if got, _ := m.Expired(base.Add(4*time.Hour), 1); !slices.Equal(ids(got), []string{"gone"}) {
		t.Errorf("the soonest expired first, within the limit: %v", ids(got))
	}
	page, total, err := m.List(Filter{Alive: at}, 10, 0)
	if err != nil || total != 4 || slices.Contains(ids(page), "gone") {
		t.Errorf("a page at base+2h: %v (total %d), %v; want every job but the expired one", ids(page), total, err)
	}
	if all, total, _ := m.List(Filter{}, 10, 0); total != 5 || len(all) != 5 {
		t.Errorf("without Alive every job is listed: %v", ids(all))
	}
	after, err := m.After(Filter{Alive: at}, 10, Cursor{Created: base.Add(time.Hour)})
	if err != nil || slices.Contains(ids(after), "gone") || len(after) != 4 {
		t.Errorf("a keyset page at base+2h: %v %v", ids(after), err)
	}
}

// A key's jobs in the list (Filter.Key), on both databases.
func TestListByKey(t *testing.T) {
	for _, impl := range metas {
		t.Run(impl.name, func(t *testing.T) {
			m := impl.open(t)
			defer m.Close()
			for i, key := range []string{"alice", "bob", "alice", ""} {
				j := job(fmt.Sprintf("j%d", i), i, api.StatusQueued, "target", 1)
				j.Key = key
				mustCreate(t, m, j)
			}
			page, total, err := m.List(Filter{Key: "alice"}, 10, 0)
			if err != nil || total != 2 || !slices.Equal(ids(page), []string{"j2", "j0"}) {
				t.Fatalf("alice's jobs: %v (%d) %v", ids(page), total, err)
			}
		})
	}
}

// Replicas admitting at once on one PostgreSQL: one job per Idempotency-Key however many
// race (the unique index decides), a key's in-flight limit exactly (the advisory lock), and
// the bound on waiting jobs exactly (another).
func TestPostgresAdmitRaces(t *testing.T) {
	dsn := storetest.Postgres(t)
	replicas := make([]*Postgres, 4)
	for i := range replicas {
		p, err := OpenPostgres(dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		replicas[i] = p
	}
	const tries = 24
	var wg sync.WaitGroup
	got := make([]string, tries)
	replays := make([]bool, tries)
	errs := make([]error, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := job(fmt.Sprintf("same-%02d", i), i, api.StatusQueued, "target", 1)
			j.Key, j.IdempotencyKey = "alice", "one"
			var s Job
			s, replays[i], errs[i] = replicas[i%len(replicas)].Admit(j, Limits{})
			got[i] = s.ID
		}()
	}
	wg.Wait()
	made := 0
	for i := range tries {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("try %d: job %q (%v); try 0 got %q", i, got[i], errs[i], got[0])
		}
		if !replays[i] {
			made++
		}
	}
	if made != 1 {
		t.Errorf("%d tries made a job, want 1", made)
	}
	admitted := make([]bool, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := job(fmt.Sprintf("limited-%02d", i), i, api.StatusQueued, "target", 1)
			j.Key = "bob"
			_, _, err := replicas[i%len(replicas)].Admit(j, Limits{MaxInFlight: 3})
			var limit *InFlightError
			if err != nil && !errors.As(err, &limit) {
				t.Errorf("try %d: %v", i, err)
			}
			admitted[i] = err == nil
		}()
	}
	wg.Wait()
	if n := len(slices.DeleteFunc(admitted, func(ok bool) bool { return !ok })); n != 3 {
		t.Errorf("%d of bob's jobs admitted at once with a limit of 3 in flight", n)
	}
	before, err := replicas[0].Waiting() // alice's job and bob's three
	if err != nil {
		t.Fatal(err)
	}
	bound := before + 2
	admitted = make([]bool, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := job(fmt.Sprintf("queued-%02d", i), i, api.StatusQueued, "target", 1)
			j.Key = fmt.Sprintf("key-%02d", i) // no key's limit in the way
			_, _, err := replicas[i%len(replicas)].Admit(j, Limits{Waiting: bound})
			if err != nil && !errors.Is(err, ErrQueueFull) {
				t.Errorf("try %d: %v", i, err)
			}
			admitted[i] = err == nil
		}()
	}
	wg.Wait()
	if n := len(slices.DeleteFunc(admitted, func(ok bool) bool { return !ok })); n != 2 {
		t.Errorf("%d jobs admitted at once into a queue bound to %d with %d waiting, want 2", n, bound, before)
	}
}

// The sweep's lease is one replica's at a time, renewed by its holder, taken over once it
// runs out.
func TestPostgresSweepLease(t *testing.T) {
	dsn := storetest.Postgres(t)
	a, err := OpenPostgres(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenPostgres(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, step := range []struct {
		m      *Postgres
		holder string
		want   bool
	}{{a, "A", true}, {b, "B", false}, {a, "A", true}, {b, "B", false}} {
		if got, err := step.m.SweepLease(step.holder, 400*time.Millisecond); err != nil || got != step.want {
			t.Fatalf("%s: %v %v, want %v", step.holder, got, err, step.want)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if got, err := b.SweepLease("B", time.Second); err != nil || !got {
		t.Fatalf("B after A's lease ran out: %v %v", got, err)
	}
	if got, _ := a.SweepLease("A", time.Second); got {
		t.Fatal("A took the lease back while B held it")
	}
}

// The store check leaves an expired job's objects and records alone (the sweep removes them,
// objects first: one may be half gone) and its repair removes the job.
func TestCheckLeavesExpiredToTheSweep(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	gone := finished("a0000000-0000-0000-0000-00000000000a", 0, time.Second)
	mustCreate(t, st, gone)
	for i := range 2 {
		if err := st.AddImage(Image{ID: ImageID(gone.ID, i), JobID: gone.ID, Index: i, ClassName: "c"}, []byte("png")); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Blobs.Delete(gone.ID + "/0.png"); err != nil { // a sweep cut short
		t.Fatal(err)
	}
	o, err := st.Check(0)
	if err != nil || len(o.ObjectsWithoutRecord)+len(o.RecordsWithoutObject) != 0 || !slices.Equal(o.Expired, []string{gone.ID}) {
		t.Fatalf("check: %+v %v", o, err)
	}
	if err := st.Repair(o); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Job(gone.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("the expired job is still there after the repair: %v", err)
	}
	if _, err := st.Blobs.Get(gone.ID + "/1.png"); !errors.Is(err, ErrNotFound) {
		t.Errorf("its object is still there: %v", err)
	}
}

// A database file made before the hosted columns gets them when opened.
func TestSQLiteGetsHostedColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "marspec.db")
	m, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range hostedColumns { // back to the file an older binary made
		if _, err := m.db.Exec(`DROP INDEX IF EXISTS jobs_idempotency; DROP INDEX IF EXISTS jobs_key_unfinished;
			DROP INDEX IF EXISTS jobs_key_created; DROP INDEX IF EXISTS jobs_expiry; ALTER TABLE jobs DROP COLUMN ` + c.name); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	m, err = OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	caseHostedRoundTrip(t, m)
}

// Replicas' clocks need not agree: PostgreSQL stamps a job's end with its own clock, whatever
// time the ending replica passes (here a day behind), and the sweep measures retention by that
// clock (Now). A job kept an hour that ended just now is not expired, however it ended.
func TestPostgresExpiryOnTheDatabasesClock(t *testing.T) {
	p, err := OpenPostgres(storetest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	behind := time.Now().Add(-24 * time.Hour)
	for i, end := range []func(id string) error{
		func(id string) error { return p.Finish(id, api.StatusSucceeded, "", behind) },
		func(id string) error {
			j, ok, err := p.Claim("replica-a", time.Minute, "cancelled")
			if err != nil || !ok || j.ID != id {
				return fmt.Errorf("claim: %v %v %s", ok, err, j.ID)
			}
			_, err = p.FinishOwned(Hold{Owner: "replica-a", Attempt: j.Attempt}, id, api.StatusSucceeded, "", behind)
			return err
		},
		func(id string) error { _, err := p.Cancel(id, "cancelled", behind); return err },
	} {
		j := job(fmt.Sprintf("ended-%d", i), i, api.StatusQueued, "target", 1)
		j.Retain = time.Hour
		mustCreate(t, p, j)
		if err := end(j.ID); err != nil {
			t.Fatal(err)
		}
		now, err := p.Now()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := p.Expired(SweepCut(now, 0), 10); err != nil || len(got) != 0 {
			t.Errorf("end %d: expired on the database's clock right after it ended: %v %v", i, ids(got), err)
		}
		got, err := p.Expired(SweepCut(now.Add(2*time.Hour), 0), 10)
		if err != nil || !slices.Contains(ids(got), j.ID) {
			t.Errorf("end %d: not expired two hours on: %v %v", i, ids(got), err)
		}
	}
}
