package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
	"marspec/store/storetest"
)

// Outages ridden out: a store that goes away for longer than the lease, under load, fails no
// job, answers no client with a 500, and leaves every job with the one-replica bytes. The
// outage lasts 3 s (three leases); MARSPEC_OUTAGE=30s runs it as the 30 s stop.

func outageLength(t *testing.T) time.Duration {
	if v := os.Getenv("MARSPEC_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("MARSPEC_OUTAGE=%s: %v", v, err)
		}
		return d
	}
	return 3 * time.Second
}

// clients ask every replica for the job list and each job while the test runs, and count
// the answers by status: the store's outage must show as 503s, never 500s.
type clients struct {
	mu    sync.Mutex
	codes map[int]int
	stop  chan struct{}
	wg    sync.WaitGroup
}

func askThroughout(t *testing.T, reps []*testServer, ids []string) *clients {
	c := &clients{codes: map[int]int{}, stop: make(chan struct{})}
	for _, ts := range reps {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-c.stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				path := "/v1/generations"
				if i%2 == 1 {
					path += "/" + ids[i%len(ids)]
				}
				resp, err := http.Get(ts.http.URL + path)
				if err != nil {
					continue
				}
				resp.Body.Close()
				c.mu.Lock()
				c.codes[resp.StatusCode]++
				c.mu.Unlock()
			}
		}()
	}
	return c
}

func (c *clients) end(t *testing.T) {
	close(c.stop)
	c.wg.Wait()
	t.Logf("answers to clients during the test, by status: %v", c.codes)
	if c.codes[http.StatusInternalServerError] > 0 {
		t.Errorf("%d answers were 500", c.codes[http.StatusInternalServerError])
	}
}

// noOrphans: the store check finds no object without a record and no record without an
// object.
func noOrphans(t *testing.T, ts *testServer) {
	t.Helper()
	o, err := ts.store.Check(SweepGrace(ts.cfg))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.ObjectsWithoutRecord)+len(o.RecordsWithoutObject) > 0 {
		t.Errorf("orphans after the outage: %+v", o)
	}
}

// postAll posts reqs round-robin to the replicas.
func postAll(t *testing.T, reps []*testServer, reqs []api.GenerateRequest) []string {
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		g, err := reps[i%len(reps)].client.Generate(t.Context(), r, 0)
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		ids[i] = g.ID
	}
	return ids
}

// endOf polls a job until it ends (after an outage the replicas claim it again first).
func endOf(t *testing.T, ts *testServer, id string, within time.Duration) *api.Generation {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		g, err := ts.client.Generation(t.Context(), id)
		if err == nil && g.Ended() {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not ended %v after the outage: %+v %v", id, within, g, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// slowImages makes every image take 250 ms more, so jobs are mid-run when the store goes.
func slowImages(reps ...*testServer) {
	for _, ts := range reps {
		ts.afterImage = func(string, int) { time.Sleep(250 * time.Millisecond) }
	}
}

// The shared database stops under load, for most of a lease (the retry used to give up at
// half of one and fail the job) and for three leases: every job succeeds.
func TestReplicasRideOutADatabaseOutage(t *testing.T) {
	reqs := replicaRequests(10)
	want := reference(t, reqs)
	d := outageLength(t)
	for name, lease := range map[string]time.Duration{"within the lease": d * 4 / 3, "past the lease": d / 3} {
		t.Run(name, func(t *testing.T) {
			sh := newShared(t, "files")
			withLease := func(c *Config) { c.Lease = lease }
			a, b := sh.replica(t, false, withLease), sh.replica(t, false, withLease)
			reps := []*testServer{a, b}
			slowImages(a, b)
			ids := postAll(t, reps, reqs)
			asking := askThroughout(t, reps, ids)
			time.Sleep(300 * time.Millisecond)
			storetest.Outage(t, sh.dsn, d)
			for i, id := range ids {
				sameImages(t, a, endOf(t, a, id, lease+30*time.Second), want[i])
			}
			asking.end(t)
			noOrphans(t, a)
		})
	}
}

// The object store stops for three leases under load: every job succeeds, on replicas and
// on one server alone over SQLite.
func TestObjectStoreOutageFailsNoJob(t *testing.T) {
	reqs := replicaRequests(10)
	want := reference(t, reqs)
	for name, open := range map[string]func(t *testing.T, s3 *storetest.S3Server) []*testServer{
		"replicas": func(t *testing.T, s3 *storetest.S3Server) []*testServer {
			sh := sharedStore{dsn: storetest.Postgres(t), blobs: s3Blobs(s3.URL("images"))}
			return []*testServer{sh.replica(t, false, nil), sh.replica(t, false, nil)}
		},
		"sqlite": func(t *testing.T, s3 *storetest.S3Server) []*testServer { return []*testServer{startS3(t, s3, false)} },
	} {
		t.Run(name, func(t *testing.T) {
			s3 := storetest.S3(t)
			reps := open(t, s3)
			slowImages(reps...)
			ids := postAll(t, reps, reqs)
			asking := askThroughout(t, reps, ids)
			time.Sleep(300 * time.Millisecond)
			s3.Stop()
			time.Sleep(outageLength(t))
			s3.Start(t)
			for i, id := range ids {
				sameImages(t, reps[0], endOf(t, reps[0], id, 30*time.Second), want[i])
			}
			asking.end(t)
			noOrphans(t, reps[0])
		})
	}
}

// refuseFirstStart is a start-write hook that refuses the first write as a database outage
// does, after holding it 200 ms (long enough to see the scheduler answer meanwhile), and says
// on refused when it is holding it.
func refuseFirstStart(refused chan<- struct{}) func(id string) error {
	var done atomic.Bool
	return func(string) error {
		if done.Swap(true) {
			return nil
		}
		refused <- struct{}{}
		time.Sleep(200 * time.Millisecond)
		return &store.UnavailableError{Store: "database", Cause: "connection refused", Err: errors.New("dial tcp: connection refused")}
	}
}

// startingMeta is a single server's database with a hook on its start writes.
type startingMeta struct {
	store.Meta
	setRunning func(id string) error
}

func (m *startingMeta) SetRunning(id string, at time.Time) error {
	if err := m.setRunning(id); err != nil {
		return err
	}
	return m.Meta.SetRunning(id, at)
}

// A job's start refused by the store (an outage) is written again, as the run's images and
// end are: the job shows running while it runs. It was written once, so the job showed
// "queued" until its end. The scheduler answers while the write waits (its lock is not held).
func TestStartWrittenThroughAnOutage(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := store.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		refused := make(chan struct{})
		st.Meta = &startingMeta{Meta: st.Meta, setRunning: refuseFirstStart(refused)}
		startThroughARefusal(t, startWith(t, st, "", true, testConfig()), refused)
	})
	t.Run("shared", func(t *testing.T) {
		refused := make(chan struct{})
		sh := newShared(t, "files")
		startThroughARefusal(t, sh.hooked(t, &hookedQueue{setRunning: refuseFirstStart(refused)}, true, io.Discard), refused)
	})
}

func startThroughARefusal(t *testing.T, ts *testServer, refused <-chan struct{}) {
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Mode: "draft", Seed: seed(12)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, refused, "the start write")
	began := time.Now()
	ts.sched.Depth()
	if took := time.Since(began); took > 100*time.Millisecond {
		t.Errorf("the scheduler took %v to answer while a start write waited", took)
	}
	receive(t, ts.gate.stored, "the first image")
	if j, err := ts.store.Job(g.ID); err != nil || j.Status != api.StatusRunning || j.Started == nil {
		t.Errorf("mid-run, after a refused start write, the store has the job %s started %v (%v); want running", j.Status, j.Started, err)
	}
	ts.gate.release()
	if final := ts.waitEnd(t, g.ID); final.Status != api.StatusSucceeded {
		t.Errorf("job ended %s %q", final.Status, final.Error)
	}
}
