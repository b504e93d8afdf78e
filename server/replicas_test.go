package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
	"marspec/store/storetest"
)

// Replicas: servers in one test process sharing one PostgreSQL database and one image store,
// as replicas behind a load balancer share them. They skip (with the reason) where no
// PostgreSQL answers, unless MARSPEC_REQUIRE_POSTGRES=1.

// sharedStore opens the shared database and blobs as one replica does (its own connections).
type sharedStore struct {
	dsn   string
	blobs func(t *testing.T) store.Blobs
}

// newShared is a fresh database and image store: blobs "files" (a folder) or "s3" (versitygw).
func newShared(t *testing.T, blobs string) sharedStore {
	sh := sharedStore{dsn: storetest.Postgres(t)}
	if blobs == "s3" {
		sh.blobs = s3Blobs(storetest.S3(t).URL("images"))
		return sh
	}
	dir := t.TempDir()
	sh.blobs = func(t *testing.T) store.Blobs {
		b, err := store.NewFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return sh
}

// s3Blobs opens the bucket at url, once per replica.
func s3Blobs(url string) func(t *testing.T) store.Blobs {
	return func(t *testing.T) store.Blobs {
		b, err := store.OpenS3(url)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func (sh sharedStore) replica(t *testing.T, held bool, edit func(*Config)) *testServer {
	t.Helper()
	meta, err := store.OpenPostgres(sh.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Lease = time.Second
	if edit != nil {
		edit(&cfg)
	}
	return startWith(t, store.New(meta, sh.blobs(t)), "", held, cfg)
}

// hookedQueue is a replica's view of the shared database with test hooks on its queue calls,
// standing in for a database that holds a call up or refuses it. A nil hook does nothing.
type hookedQueue struct {
	*store.Postgres
	claim      func()                    // before each Claim
	renew      func(held map[string]int) // before each Renew
	setRunning func(id string) error     // before each SetRunningOwned: its error instead
}

func (q *hookedQueue) Claim(owner string, lease time.Duration, cancelReason string) (store.Job, bool, error) {
	if q.claim != nil {
		q.claim()
	}
	return q.Postgres.Claim(owner, lease, cancelReason)
}

func (q *hookedQueue) Renew(owner string, held map[string]int, lease time.Duration) (lost, cancel []string, err error) {
	if q.renew != nil {
		q.renew(held)
	}
	return q.Postgres.Renew(owner, held, lease)
}

func (q *hookedQueue) SetRunningOwned(h store.Hold, id string, at time.Time) (bool, error) {
	if q.setRunning != nil {
		if err := q.setRunning(id); err != nil {
			return false, err
		}
	}
	return q.Postgres.SetRunningOwned(h, id, at)
}

// hooked is a replica (lease 1 s) over the shared store through q, its log written to w.
func (sh sharedStore) hooked(t *testing.T, q *hookedQueue, held bool, w io.Writer) *testServer {
	t.Helper()
	meta, err := store.OpenPostgres(sh.dsn)
	if err != nil {
		t.Fatal(err)
	}
	q.Postgres = meta
	cfg := testConfig()
	cfg.Lease = time.Second
	return startLogged(t, store.New(q, sh.blobs(t)), "", held, cfg, w)
}

// crash stops a replica as kill -9 would, as far as the others can tell: it stops renewing
// and claiming, its HTTP server goes, and nothing is given back. Its workers are left where
// they are (a held one stays held until the test ends, then writes late: fencing must hold).
func (ts *testServer) crash(t *testing.T) {
	_ = ts.rep.halt(context.Background())
	ts.bg.halt() // its sweeps and webhook deliveries stop mid-call, recording nothing
	ts.sched.Close()
	ts.http.Close()
	ts.http = nil
	t.Cleanup(func() {
		if ts.gate != nil {
			ts.gate.release()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ts.sched.Shutdown(ctx)
		ts.store.Close()
	})
}

// replicaRequests are varied jobs: modes, classes, sizes, seeds.
func replicaRequests(n int) []api.GenerateRequest {
	modes := []string{"target", "spec", "draft"}
	var out []api.GenerateRequest
	for i := range n {
		out = append(out, api.GenerateRequest{Class: api.Classes{strconv.Itoa(i % 3)}, N: 1 + i%3, Mode: modes[i%len(modes)],
			Seed: seed(uint64(100 + i))})
	}
	return out
}

// reference runs the requests on one embedded (SQLite) server: the bytes every replica
// arrangement must reproduce, by request and image index.
func reference(t *testing.T, reqs []api.GenerateRequest) [][][]byte {
	t.Helper()
	one := start(t, "", false, nil)
	out := make([][][]byte, len(reqs))
	for i, r := range reqs {
		g, err := one.client.Generate(t.Context(), r, 15*time.Second)
		if err != nil || g.Status != api.StatusSucceeded {
			t.Fatalf("reference %d: %+v %v", i, g, err)
		}
		out[i] = imageBytes(t, one, g)
	}
	return out
}

func imageBytes(t *testing.T, ts *testServer, g *api.Generation) [][]byte {
	t.Helper()
	var out [][]byte
	for _, im := range g.Images {
		b, err := ts.client.Image(t.Context(), im.URL)
		if err != nil {
			t.Fatalf("job %s image %d: %v", g.ID, im.Index, err)
		}
		out = append(out, b)
	}
	return out
}

// sameImages checks a finished job against the reference: succeeded, each image once, in
// index order, byte-identical.
func sameImages(t *testing.T, ts *testServer, g *api.Generation, want [][]byte) {
	t.Helper()
	if g.Status != api.StatusSucceeded || len(g.Images) != len(want) {
		t.Errorf("job %s: %s %q with %d images, want succeeded with %d", g.ID, g.Status, g.Error, len(g.Images), len(want))
		return
	}
	for i, b := range imageBytes(t, ts, g) {
		if g.Images[i].Index != i {
			t.Errorf("job %s: image %d has index %d", g.ID, i, g.Images[i].Index)
		}
		if !bytes.Equal(b, want[i]) {
			t.Errorf("job %s image %d differs from the one-replica run", g.ID, i)
		}
	}
}

// ranOn records which replica stored each job's images.
type ranOn struct {
	mu  sync.Mutex
	job map[string]map[string]bool
}

func (r *ranOn) hook(name string) func(string, int) {
	return func(job string, _ int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.job[job] == nil {
			r.job[job] = map[string]bool{}
		}
		r.job[job][name] = true
	}
}

// Jobs posted round-robin to two replicas all succeed once with the one-replica bytes, both
// replicas work, and each job's events stream from the replica it was not posted to; images
// in a shared folder and in S3.
func TestReplicasShareTheQueue(t *testing.T) {
	reqs := replicaRequests(40)
	want := reference(t, reqs)
	for _, blobs := range []string{"files", "s3"} {
		t.Run(blobs, func(t *testing.T) { shareTheQueue(t, newShared(t, blobs), reqs, want) })
	}
}

func shareTheQueue(t *testing.T, sh sharedStore, reqs []api.GenerateRequest, want [][][]byte) {
	a := sh.replica(t, false, nil)
	b := sh.replica(t, false, nil)
	ran := &ranOn{job: map[string]map[string]bool{}}
	a.afterImage, b.afterImage = ran.hook("A"), ran.hook("B")
	reps := []*testServer{a, b}
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		g, err := reps[i%2].client.Generate(t.Context(), r, 0)
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		ids[i] = g.ID
	}
	for i, id := range ids {
		other := reps[(i+1)%2]
		g := other.waitEnd(t, id)
		sameImages(t, other, g, want[i])
	}
	perReplica := map[string]int{}
	for _, id := range ids {
		for name := range ran.job[id] {
			perReplica[name]++
		}
		if len(ran.job[id]) != 1 {
			t.Errorf("job %s ran on %v", id, ran.job[id])
		}
	}
	t.Logf("jobs per replica: %v", perReplica)
	if text, err := a.client.Metrics(t.Context()); err != nil || !strings.Contains(text, "marspec_queue_waiting 0") {
		t.Errorf("the shared queue's length is not a metric: %v", err)
	}
	if perReplica["A"] == 0 || perReplica["B"] == 0 {
		t.Errorf("one replica did all the work: %v", perReplica)
	}
}

// Jobs posted only to replica A are run by B as well: the queue is shared. A holds its first
// job mid-run (and, with a batch of one image, claims no other) before B starts.
func TestReplicaIdleTakesWork(t *testing.T) {
	sh := newShared(t, "files")
	a := sh.replica(t, true, func(c *Config) { c.MaxBatch = 1 })
	var ids []string
	for _, r := range replicaRequests(4) {
		g, err := a.client.Generate(t.Context(), r, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	held := receive(t, a.gate.stored, "A's first image")
	b := sh.replica(t, false, nil)
	for _, id := range ids {
		if id == held {
			continue
		}
		if g := b.waitEnd(t, id); g.Status != api.StatusSucceeded {
			t.Errorf("job %s: %s %q", id, g.Status, g.Error)
		}
	}
	a.gate.release()
	if g := b.waitEnd(t, held); g.Status != api.StatusSucceeded {
		t.Errorf("held job %s: %s", held, g.Status)
	}
}

// receive waits for a value from ch for at most 20 s (a test that would hang fails instead).
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("waited 20 s for %s", what)
		panic("unreachable")
	}
}

// A replica killed mid-run: its jobs are finished by the other once the lease runs out, with
// the one-replica bytes, no image twice, no job left running; the dead replica's late writes
// change nothing.
func TestReplicaKilledJobsFinishElsewhere(t *testing.T) {
	sh := newShared(t, "files")
	reqs := replicaRequests(6)
	want := reference(t, reqs)
	a := sh.replica(t, true, nil)
	var ids []string
	for _, r := range reqs {
		g, err := a.client.Generate(t.Context(), r, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	receive(t, a.gate.stored, "A's first image") // A is held mid-run, with the jobs it claimed
	b := sh.replica(t, false, nil)
	a.crash(t)
	killed := time.Now()
	for i, id := range ids {
		g := b.waitEnd(t, id)
		sameImages(t, b, g, want[i])
	}
	took := time.Since(killed)
	t.Logf("all jobs of the killed replica done %v after the kill (lease %v, poll %v)", took, time.Second, pollEvery)
	if took > 2*time.Second+pollEvery+2*time.Second {
		t.Errorf("failover took %v", took)
	}
	a.gate.release() // the dead replica's worker wakes and writes late
	time.Sleep(200 * time.Millisecond)
	for i, id := range ids {
		g, err := b.client.Generation(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		sameImages(t, b, g, want[i])
	}
	list, err := b.client.List(t.Context(), api.ListOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range list.Generations {
		if !g.Ended() {
			t.Errorf("job %s left %s", g.ID, g.Status)
		}
	}
}

// Events and cancellation across replicas: a job running on B streams its progress (with its
// rate and time left) through A, and a DELETE sent to A stops it on B within about a second.
func TestReplicaEventsAndCancelAcross(t *testing.T) {
	sh := newShared(t, "files")
	b := sh.replica(t, false, nil)
	stored := make(chan int, 64)
	b.afterImage = func(_ string, i int) { // a slow engine: the job runs for seconds
		stored <- i
		time.Sleep(50 * time.Millisecond)
	}
	g, err := b.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 48, Mode: "target", Seed: seed(5)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, stored, "B's first image")
	a := sh.replica(t, false, nil)
	events := make(chan api.Event, 100)
	ended := make(chan *api.Generation, 1)
	go func() {
		final, err := a.client.Events(t.Context(), g.ID, func(ev api.Event) error {
			select { // never hold the stream up: the test reads only the first events
			case events <- ev:
			default:
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		ended <- final
	}()
	if ev := receive(t, events, "the stream's first event"); ev.Type != "generation" || ev.Generation.Status != api.StatusRunning {
		t.Fatalf("first event: %+v", ev)
	}
	seen := map[string]bool{}
	for !seen["image"] || !seen["progress"] {
		select {
		case ev := <-events:
			// progress comes with its rate and time left (B has decoded tokens by now)
			seen[ev.Type] = ev.Type != "progress" || (ev.Progress.TokensPerSecond != nil && ev.Progress.SecondsLeft != nil)
		case <-time.After(5 * time.Second):
			t.Fatalf("events from the other replica: only %v", seen)
		}
	}
	asked := time.Now()
	if _, err := a.client.Delete(t.Context(), g.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case final := <-ended:
		took := time.Since(asked)
		t.Logf("cancel across replicas took %v", took)
		if final.Status != api.StatusCancelled || took > 1500*time.Millisecond || len(final.Images) == 48 {
			t.Errorf("after a DELETE on the other replica: %s in %v", final.Status, took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end after the DELETE")
	}
	if _, err := a.client.Delete(t.Context(), g.ID); err != nil { // finished: deleted
		t.Errorf("deleting the cancelled job: %v", err)
	}
	if _, err := b.client.Generation(t.Context(), g.ID); err == nil || !api.IsStatus(err, 404) {
		t.Errorf("deleted job still answers: %v", err)
	}
}

// The database goes away mid-run (connections cut, new ones refused, for less than the
// lease) and comes back: the replicas reconnect and every job finishes with the one-replica
// bytes.
func TestReplicasSurviveADatabaseOutage(t *testing.T) {
	sh := newShared(t, "files")
	reqs := replicaRequests(8)
	want := reference(t, reqs)
	var mu sync.Mutex
	var outage bool
	after := 0 // images stored once the outage began
	slow := func(string, int) {
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		if outage {
			after++
		}
		mu.Unlock()
	}
	lease := func(c *Config) { c.Lease = 4 * time.Second }
	a, b := sh.replica(t, false, lease), sh.replica(t, false, lease)
	a.afterImage, b.afterImage = slow, slow
	reps := []*testServer{a, b}
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		g, err := reps[i%2].client.Generate(t.Context(), r, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = g.ID
	}
	// every job followed through the other replica's event stream, across the outage
	finals := make([]*api.Generation, len(ids))
	var streams, opened sync.WaitGroup
	for i, id := range ids {
		streams.Add(1)
		opened.Add(1)
		go func() {
			defer streams.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var first sync.Once
			g, err := reps[(i+1)%2].client.Events(ctx, id, func(api.Event) error { first.Do(opened.Done); return nil })
			first.Do(opened.Done)
			if err != nil {
				t.Errorf("stream of job %s: %v", id, err)
			}
			finals[i] = g
		}()
	}
	opened.Wait() // every stream is open (a request that meets the outage is a 503 to retry)
	mu.Lock()
	outage = true
	mu.Unlock()
	storetest.Outage(t, sh.dsn, 1500*time.Millisecond)
	streams.Wait()
	for i, g := range finals {
		if g == nil {
			continue
		}
		if !g.Ended() { // the stream ended while the job still ran: a watcher gave up
			t.Errorf("the stream of job %s ended with the job %s", g.ID, g.Status)
			continue
		}
		sameImages(t, reps[i%2], g, want[i])
	}
	mu.Lock()
	defer mu.Unlock()
	if after == 0 {
		t.Error("every job ended before the outage: the test tested nothing")
	}
	t.Logf("%d images stored after the outage began", after)
}

// A queued job no replica can run (its request names a class the models lack) fails with the
// reason instead of circling the queue.
func TestReplicaFailsAJobItCannotRun(t *testing.T) {
	sh := newShared(t, "files")
	a := sh.replica(t, false, nil)
	bad := store.Job{ID: "0e0c7c1a-7d43-4b0b-9e55-6e4b2d3a1f01", Created: time.Now(), Status: api.StatusQueued,
		Request: api.GenerateRequest{Class: api.Classes{"7"}, Mode: "target", Seed: seed(1)}, Settings: api.Settings{Mode: "target", Classes: []int{7}}}
	if err := a.store.CreateJob(bad); err != nil {
		t.Fatal(err)
	}
	a.rep.poke()
	g := a.waitEnd(t, bad.ID)
	if g.Status != api.StatusFailed || !strings.Contains(g.Error, "not run: ") || !strings.Contains(g.Error, "class") {
		t.Fatalf("unrunnable job: %s %q", g.Status, g.Error)
	}
}

// A replica shut down cleanly gives its unfinished jobs back at once: the other finishes them
// long before the lease (30 s here) would have run out.
func TestReplicaShutdownGivesJobsBack(t *testing.T) {
	sh := newShared(t, "files")
	long := func(c *Config) { c.Lease = 30 * time.Second }
	a := sh.replica(t, true, long)
	var ids []string
	for _, r := range replicaRequests(3) {
		g, err := a.client.Generate(t.Context(), r, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	receive(t, a.gate.stored, "A's first image")
	b := sh.replica(t, false, long)
	a.sched.Close() // the workers stop after this step: the jobs stay unfinished
	a.stop(t)
	stopped := time.Now()
	for _, id := range ids {
		if g := b.waitEnd(t, id); g.Status != api.StatusSucceeded {
			t.Errorf("job %s: %s %q", id, g.Status, g.Error)
		}
	}
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("jobs given back at shutdown took %v to finish elsewhere", took)
	} else {
		t.Logf("jobs given back at shutdown finished elsewhere in %v", took)
	}
}

// Shutdown keeps its deadline while a replica goroutine is held up in a store call (a
// database that does not answer): halt waited for the goroutines without a limit, so Shutdown
// returned only when the call did, long after its deadline.
func TestShutdownDeadlineWhileAStoreCallHangs(t *testing.T) {
	sh := newShared(t, "files")
	var hang atomic.Bool
	hung := make(chan struct{}, 1)
	q := &hookedQueue{claim: func() {
		if hang.Load() {
			select {
			case hung <- struct{}{}:
			default:
			}
			time.Sleep(3 * time.Second)
		}
	}}
	a := sh.hooked(t, q, false, io.Discard)
	hang.Store(true)
	a.rep.poke()
	receive(t, hung, "a claim held up by the database")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := a.Shutdown(ctx)
	if took := time.Since(began); took > 1500*time.Millisecond {
		t.Errorf("Shutdown with a 300 ms deadline took %v (a claim hung for 3 s)", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(fmt.Sprint(err), "store calls") {
		t.Errorf("Shutdown past its deadline returned %v; want it to say a store call held it up", err)
	}
}
