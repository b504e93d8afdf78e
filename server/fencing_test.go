package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"marspec/api"
	"marspec/store"
)

// Fencing by (owner, attempt): a run whose claim was lost writes nothing, even when its
// replica owns the job again as a later attempt.

// sqlOn runs statements on the shared database, standing in for another replica.
func sqlOn(t *testing.T, dsn string, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

// takeOver makes the job another replica's, as its claim after a lapsed lease would.
func takeOver(t *testing.T, dsn, id string) {
	sqlOn(t, dsn, `UPDATE jobs SET owner = 'other', attempt = attempt + 1, lease_until = now() + interval '1 hour' WHERE id = $1`, id)
}

// A renewal finds another replica owns the job and stops the run; that replica gives the job
// back and this one claims it again. The doomed run (12 images: it goes back to admission,
// where the cancellation takes effect) must not end the new attempt: the job
// ends succeeded with every image, not "cancelled by a DELETE request" that nobody sent.
func TestLostRunDoesNotEndItsReclaimedJob(t *testing.T) {
	sh := newShared(t, "files")
	a := sh.replica(t, true, nil) // lease 1 s, renewed every 333 ms; batches of 4 images
	// A claims while the doomed run still has images to admit (where its cancellation takes
	// effect): as a replica does whose other work ended, here by raising its claim threshold
	// above the batch the scheduler runs (set before any job exists; the claim loop only
	// reads it).
	a.cfg.MaxBatch = 64
	g, err := a.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 12, Mode: "draft", Seed: seed(9)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, a.gate.stored, "the first image")
	takeOver(t, sh.dsn, g.ID)
	// a renewal finds the claim gone and stops the run; the other replica gives the job back
	time.Sleep(time.Second)
	sqlOn(t, sh.dsn, `UPDATE jobs SET owner = NULL, lease_until = NULL, status = 'queued' WHERE id = $1`, g.ID)
	a.rep.poke()
	time.Sleep(300 * time.Millisecond) // A claims it again while the doomed run is still held
	a.gate.release()
	final := a.waitEnd(t, g.ID)
	if final.Status != api.StatusSucceeded || len(final.Images) != 12 {
		t.Fatalf("reclaimed job ended %s %q with %d of 12 images", final.Status, final.Error, len(final.Images))
	}
}

// A run whose lease lapsed (another replica owns the job now) stores neither the objects nor
// the records of the images it finishes afterwards, and does not end the job.
func TestLapsedRunStoresNoImages(t *testing.T) {
	sh := newShared(t, "files")
	// no renewal notices the loss; one image in flight, so each step stores one image and the
	// gate holds the run between the first image and the others
	a := sh.replica(t, true, func(c *Config) { c.Lease = time.Hour; c.MaxBatch = 1 })
	g, err := a.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 3, Mode: "draft", Seed: seed(10)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, a.gate.stored, "the first image")
	takeOver(t, sh.dsn, g.ID)
	a.gate.release()
	for a.sched.Has(g.ID) {
		time.Sleep(10 * time.Millisecond)
	}
	imgs, err := a.store.Images(g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 {
		t.Errorf("%d image records after the lease lapsed at the first; want 1", len(imgs))
	}
	for i := 1; i < 3; i++ {
		if _, err := a.store.Blobs.Get(g.ID + "/" + string(rune('0'+i)) + ".png"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("image %d's object was written after the lease lapsed (%v)", i, err)
		}
	}
	if j, _ := a.store.Job(g.ID); j.Status != api.StatusQueued && j.Status != api.StatusRunning {
		t.Errorf("the lapsed run ended the other replica's job: %s", j.Status)
	}
	// its end was not recorded here, so it is not counted here: summed across replicas,
	// marspec_jobs_total counts each job once
	if text, err := a.client.Metrics(t.Context()); err != nil || strings.Contains(text, "marspec_jobs_total{") {
		t.Errorf("an end this replica did not record is counted: %v\n%s", err, grepLines(text, "marspec_jobs_total"))
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A job that ends while a renewal is under way is reported lost by that renewal (its row is
// no longer running): it ended here and its end was recorded, so nothing was lost and the log
// must not say "lease lost", which would send an operator after a failure that did not happen.
func TestRenewalRacingAFinishLogsNoLoss(t *testing.T) {
	sh := newShared(t, "files")
	var caught atomic.Bool
	renewing, proceed, next := make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	q := &hookedQueue{renew: func(held map[string]int) {
		switch {
		case caught.Load():
			select {
			case next <- struct{}{}: // the renewal that caught the job has been handled
			default:
			}
		case len(held) > 0:
			caught.Store(true)
			renewing <- struct{}{}
			<-proceed
		}
	}}
	log := &logBuffer{}
	a := sh.hooked(t, q, true, log)
	g, err := a.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, Mode: "draft", Seed: seed(11)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, renewing, "a renewal of the running job")
	a.gate.release() // the job ends while the renewal holds it in its list
	if final := a.waitEnd(t, g.ID); final.Status != api.StatusSucceeded {
		t.Fatalf("job ended %s %q", final.Status, final.Error)
	}
	for a.sched.Has(g.ID) {
		time.Sleep(10 * time.Millisecond)
	}
	close(proceed)
	receive(t, next, "the next renewal")
	if strings.Contains(log.String(), "lease lost") {
		t.Errorf("a job that ended here while a renewal ran was logged as lost:\n%s", log)
	}
}
