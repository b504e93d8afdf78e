package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/store/storetest"
)

// The Meta conformance suite: every case runs against every implementation, so SQLite and
// PostgreSQL cannot drift. PostgreSQL cases skip (with the reason) when no server answers,
// unless MARSPEC_REQUIRE_POSTGRES=1.

var metas = []struct {
	name string
	open func(t *testing.T) Meta
}{
	{"sqlite", func(t *testing.T) Meta {
		m, err := OpenSQLite(filepath.Join(t.TempDir(), "marspec.db"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}},
	{"postgres", func(t *testing.T) Meta {
		m, err := OpenPostgres(storetest.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}},
}

var metaCases = []struct {
	name string
	run  func(t *testing.T, m Meta)
}{
	{"job round trip", caseJobRoundTrip},
	{"running keeps the first start", caseRunning},
	{"finish and requeue", caseFinishRequeue},
	{"list filters and pages", caseList},
	{"keyset pages and a page's images", caseKeyset},
	{"unfinished oldest first", caseUnfinished},
	{"images once, in order", caseImages},
	{"delete takes the images", caseDelete},
	{"unknown ids", caseUnknown},
}

func TestMetaConformance(t *testing.T) {
	for _, impl := range metas {
		t.Run(impl.name, func(t *testing.T) {
			for _, c := range metaCases {
				t.Run(c.name, func(t *testing.T) {
					m := impl.open(t)
					defer m.Close()
					c.run(t, m)
				})
			}
		})
	}
}

var base = time.Date(2026, 11, 24, 19, 0, 0, 123456789, time.UTC)

// job is a stored job with the given id, status, mode and classes, created i seconds after base.
func job(id string, i int, status, mode string, classes ...int) Job {
	seed := uint64(40 + i)
	return Job{ID: id, Created: base.Add(time.Duration(i) * time.Second), Status: status,
		Request:  api.GenerateRequest{Class: api.Classes{"1"}, Seed: &seed, Mode: mode},
		Settings: api.Settings{Mode: mode, Classes: classes}}
}

func mustCreate(t *testing.T, m Meta, jobs ...Job) {
	t.Helper()
	for _, j := range jobs {
		if err := m.CreateJob(j); err != nil {
			t.Fatalf("create %s: %v", j.ID, err)
		}
	}
}

func ids(jobs []Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func caseJobRoundTrip(t *testing.T, m Meta) {
	in := job("a", 0, api.StatusQueued, "spec", 3, 1)
	mustCreate(t, m, in)
	got, err := m.Job("a")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Created.Equal(in.Created) || got.Status != api.StatusQueued || got.Started != nil || got.Finished != nil ||
		*got.Request.Seed != 40 || got.Request.Mode != "spec" || fmt.Sprint(got.Settings.Classes) != "[3 1]" {
		t.Fatalf("stored %+v, read %+v", in, got)
	}
	if err := m.CreateJob(in); err == nil {
		t.Fatal("a second job with the same id was accepted")
	}
	if err := m.Ping(); err != nil {
		t.Fatal(err)
	}
}

func caseRunning(t *testing.T, m Meta) {
	mustCreate(t, m, job("a", 0, api.StatusQueued, "target", 1))
	first := base.Add(time.Minute)
	for _, at := range []time.Time{first, first.Add(time.Hour)} {
		if err := m.SetRunning("a", at); err != nil {
			t.Fatal(err)
		}
	}
	j, _ := m.Job("a")
	if j.Status != api.StatusRunning || j.Started == nil || !j.Started.Equal(first) {
		t.Fatalf("running: %+v", j)
	}
	if err := m.Finish("a", api.StatusSucceeded, "", first.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := m.SetRunning("a", first); err != nil { // a late start report changes nothing
		t.Fatal(err)
	}
	if j, _ := m.Job("a"); j.Status != api.StatusSucceeded {
		t.Fatalf("a finished job went back to %s", j.Status)
	}
}

func caseFinishRequeue(t *testing.T, m Meta) {
	mustCreate(t, m, job("a", 0, api.StatusRunning, "target", 1))
	if err := m.Requeue("a"); err != nil {
		t.Fatal(err)
	}
	if j, _ := m.Job("a"); j.Status != api.StatusQueued {
		t.Fatalf("requeued: %s", j.Status)
	}
	at := base.Add(time.Hour)
	if err := m.Finish("a", api.StatusFailed, "engine step: boom", at); err != nil {
		t.Fatal(err)
	}
	j, _ := m.Job("a")
	clock, err := m.Now() // PostgreSQL stamps its own clock, not the caller's
	if err != nil {
		t.Fatal(err)
	}
	_, shared := m.(Queue)
	if j.Status != api.StatusFailed || j.Error != "engine step: boom" || j.Finished == nil ||
		(!shared && !j.Finished.Equal(at)) || (shared && (j.Finished.After(clock) || j.Finished.Before(clock.Add(-time.Minute)))) {
		t.Fatalf("finished: %+v (the store's clock %v)", j, clock)
	}
}

func caseList(t *testing.T, m Meta) {
	mustCreate(t, m, job("a", 0, api.StatusQueued, "target", 1, 12), job("b", 1, api.StatusQueued, "spec", 2),
		job("c", 2, api.StatusSucceeded, "spec", 1), job("d", 3, api.StatusFailed, "draft", 12))
	one := 1
	for _, c := range []struct {
		f             Filter
		limit, offset int
		want          string
		total         int
	}{
		{Filter{}, 10, 0, "[d c b a]", 4},
		{Filter{Class: &one}, 10, 0, "[c a]", 2}, // class 1, not 12
		{Filter{Mode: "spec"}, 1, 1, "[b]", 2},
		{Filter{Status: api.StatusQueued}, 10, 0, "[b a]", 2},
		{Filter{Mode: "spec", Status: api.StatusSucceeded}, 10, 0, "[c]", 1},
		{Filter{}, 2, 10, "[]", 4}, // past the end: no rows, the count all the same
		{Filter{Mode: "nope"}, 10, 0, "[]", 0},
	} {
		got, total, err := m.List(c.f, c.limit, c.offset)
		if err != nil || fmt.Sprint(ids(got)) != c.want || total != c.total {
			t.Errorf("List(%+v, %d, %d) = %v, %d, %v; want %s, %d", c.f, c.limit, c.offset, ids(got), total, err, c.want, c.total)
		}
	}
}

func caseUnfinished(t *testing.T, m Meta) {
	mustCreate(t, m, job("z", 0, api.StatusRunning, "target", 1), job("y", 1, api.StatusSucceeded, "target", 1),
		job("x", 2, api.StatusQueued, "target", 1))
	un, err := m.Unfinished()
	if err != nil || fmt.Sprint(ids(un)) != "[z x]" {
		t.Fatalf("unfinished: %v %v", ids(un), err)
	}
}

func caseImages(t *testing.T, m Meta) {
	mustCreate(t, m, job("a", 0, api.StatusRunning, "spec", 1, 2, 3))
	for _, i := range []int{2, 0, 1, 2} { // index 2 twice: a resumed job makes it again
		img := Image{ID: ImageID("a", i), JobID: "a", Index: i, Class: i + 1, ClassName: "c", Seconds: 0.5}
		if i == 1 {
			img.Stats = &api.ImageStats{Alpha: 0.25, AcceptedAtPos: []int{1, 2}}
		}
		if err := m.PutImage(img); err != nil {
			t.Fatal(err)
		}
	}
	imgs, err := m.Images("a")
	if err != nil || len(imgs) != 3 {
		t.Fatalf("images: %+v %v", imgs, err)
	}
	for i, im := range imgs {
		if im.Index != i || im.ID != ImageID("a", i) || im.Class != i+1 || (im.Stats != nil) != (i == 1) {
			t.Errorf("image %d: %+v", i, im)
		}
	}
	im, err := m.Image("a-1")
	if err != nil || im.Stats.Alpha != 0.25 || fmt.Sprint(im.Stats.AcceptedAtPos) != "[1 2]" || im.Seconds != 0.5 {
		t.Fatalf("image a-1: %+v %v", im, err)
	}
}

func caseDelete(t *testing.T, m Meta) {
	mustCreate(t, m, job("a", 0, api.StatusSucceeded, "target", 1), job("b", 1, api.StatusSucceeded, "target", 1))
	for _, j := range []string{"a", "b"} {
		if err := m.PutImage(Image{ID: ImageID(j, 0), JobID: j, ClassName: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.DeleteJob("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Image("a-0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("image of a deleted job: %v", err)
	}
	if imgs, _ := m.Images("b"); len(imgs) != 1 {
		t.Errorf("the other job's images: %d", len(imgs))
	}
	if err := m.DeleteJob("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting again: %v", err)
	}
}

func caseUnknown(t *testing.T, m Meta) {
	if _, err := m.Job("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Job: %v", err)
	}
	if _, err := m.Image("nope-0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Image: %v", err)
	}
	if imgs, err := m.Images("nope"); err != nil || len(imgs) != 0 {
		t.Errorf("Images: %v %v", imgs, err)
	}
}

// The queue: PostgreSQL only (SQLite has one process and no Queue).
func TestPostgresQueue(t *testing.T) {
	dsn := storetest.Postgres(t)
	open := func() *Postgres {
		p, err := OpenPostgres(dsn) // one pool per replica, as in production
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	a, b := open(), open()
	for i := range 20 {
		mustCreate(t, a, job(fmt.Sprintf("j%02d", i), i, api.StatusQueued, "target", 1))
	}
	if n, err := a.Waiting(); err != nil || n != 20 {
		t.Fatalf("waiting: %d %v", n, err)
	}
	// Two replicas claim concurrently: every job exactly once. Each holds one before either
	// takes more: on a loaded machine one goroutine could otherwise claim all 20 before the
	// other runs, and the rest of the test needs jobs of both.
	var mu sync.Mutex
	got := map[string]string{}
	attempt := map[string]int{} // of each job's latest claim
	var wg, first sync.WaitGroup
	first.Add(2)
	for _, r := range []struct {
		q     *Postgres
		owner string
	}{{a, "A"}, {b, "B"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holds := false
			defer func() {
				if !holds {
					first.Done()
				}
			}()
			for {
				j, ok, err := r.q.Claim(r.owner, time.Minute, "cancelled")
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				if prev, dup := got[j.ID]; dup {
					t.Errorf("job %s claimed by %s and %s", j.ID, prev, r.owner)
				}
				got[j.ID] = r.owner
				attempt[j.ID] = j.Attempt
				mu.Unlock()
				if !holds {
					holds = true
					first.Done()
					first.Wait()
				}
			}
		}()
	}
	wg.Wait()
	if len(got) != 20 {
		t.Fatalf("claimed %d of 20", len(got))
	}
	if n, _ := a.Waiting(); n != 0 {
		t.Fatalf("waiting after claims: %d", n)
	}
	ofA := map[string]int{}
	for id, o := range got {
		if o == "A" {
			ofA[id] = attempt[id]
		}
	}
	if len(ofA) == 0 {
		t.Fatal("replica A claimed nothing (the test needs both)")
	}
	// A's lease runs out (it was killed): B claims A's jobs, A's writes no longer count.
	if lost, _, err := a.Renew("A", ofA, 100*time.Millisecond); err != nil || len(lost) != 0 {
		t.Fatalf("renew: lost %v, %v", lost, err)
	}
	time.Sleep(300 * time.Millisecond)
	taken, ok, err := b.Claim("B", time.Minute, "cancelled")
	if err != nil || !ok || got[taken.ID] != "A" {
		t.Fatalf("claim after expiry: %s %v %v", taken.ID, ok, err)
	}
	if taken.Attempt != attempt[taken.ID]+1 {
		t.Fatalf("claimed again as attempt %d after attempt %d", taken.Attempt, attempt[taken.ID])
	}
	oldA, newB := Hold{"A", attempt[taken.ID]}, Hold{"B", taken.Attempt}
	if lost, _, _ := a.Renew("A", map[string]int{taken.ID: oldA.Attempt}, time.Minute); len(lost) != 1 {
		t.Fatalf("the old owner still holds %s", taken.ID)
	}
	img := Image{ID: ImageID(taken.ID, 0), JobID: taken.ID, ClassName: "c"}
	if ok, err := a.PutImageOwned(oldA, img); ok || err != nil {
		t.Fatalf("the old owner recorded an image: %v %v", ok, err)
	}
	if ok, err := a.SetRunningOwned(oldA, taken.ID, time.Now()); ok || err != nil {
		t.Fatalf("the old owner set the job running: %v %v", ok, err)
	}
	if ok, err := a.FinishOwned(oldA, taken.ID, api.StatusSucceeded, "", time.Now()); ok || err != nil {
		t.Fatalf("the old owner finished the job: %v %v", ok, err)
	}
	if imgs, _ := a.Images(taken.ID); len(imgs) != 0 {
		t.Fatalf("images recorded by the old owner: %d", len(imgs))
	}
	// The same owner in an earlier attempt is fenced off as well.
	if ok, _ := b.Owns(Hold{"B", newB.Attempt - 1}, taken.ID); ok {
		t.Fatal("an earlier attempt of the owner holds the job")
	}
	if ok, err := b.PutImageOwned(newB, img); !ok || err != nil {
		t.Fatalf("the new owner could not record an image: %v %v", ok, err)
	}
	if ok, err := b.PutImageOwned(newB, img); !ok || err != nil { // idempotent
		t.Fatalf("recording the same image again: %v %v", ok, err)
	}
	if ok, err := b.FinishOwned(newB, taken.ID, api.StatusSucceeded, "", time.Now()); !ok || err != nil {
		t.Fatalf("the new owner could not finish: %v %v", ok, err)
	}
	// Cancelling: an owned job is asked (once), its owner sees it on renewal.
	var ofB string
	for id, o := range got {
		if o == "B" {
			ofB = id
			break
		}
	}
	for i, want := range []CancelOutcome{CancelAsked, CancelAskedOnce} {
		if out, err := a.Cancel(ofB, "cancelled", time.Now()); out != want || err != nil {
			t.Fatalf("cancel %d: %v %v", i, out, err)
		}
	}
	if _, cancel, _ := b.Renew("B", map[string]int{ofB: attempt[ofB]}, time.Minute); len(cancel) != 1 {
		t.Fatalf("owner not told of the cancellation: %v", cancel)
	}
	// An unowned job is cancelled at once; a finished one is left alone.
	mustCreate(t, a, job("late", 30, api.StatusQueued, "target", 1))
	if out, _ := a.Cancel("late", "cancelled", time.Now()); out != CancelEnded {
		t.Fatalf("cancel queued: %v", out)
	}
	if j, _ := a.Job("late"); j.Status != api.StatusCancelled {
		t.Fatalf("cancelled job is %s", j.Status)
	}
	if out, _ := a.Cancel("late", "cancelled", time.Now()); out != CancelFinished {
		t.Fatalf("cancel finished: %v", out)
	}
	// Release hands jobs back at once.
	if err := b.Release("B", map[string]int{ofB: attempt[ofB]}); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.Waiting(); n != 1 {
		t.Fatalf("released job not waiting: %d", n)
	}
}

// listening opens a PostgreSQL store and listens on it until the test ends; got has every
// message heard, in order.
func listening(t *testing.T) (p *Postgres, got <-chan string) {
	t.Helper()
	p, err := OpenPostgres(storetest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	up, heard := make(chan struct{}, 1), make(chan string, 1000)
	go p.Listen(ctx, func(m string) { heard <- m }, func(err error) {
		if err == nil {
			up <- struct{}{}
		}
	})
	<-up
	return p, heard
}

// Messages sent in one call arrive, every one and in their order, as separate notifications.
func TestPostgresNotifyManyInOrder(t *testing.T) {
	p, got := listening(t)
	if err := p.Notify(); err != nil {
		t.Fatalf("no messages: %v", err)
	}
	var sent []string
	for i := range 300 {
		sent = append(sent, fmt.Sprintf(`{"job":"j%d","index":%d}`, i%7, i))
	}
	if err := p.Notify(sent...); err != nil {
		t.Fatal(err)
	}
	for i, want := range sent {
		select {
		case m := <-got:
			if m != want {
				t.Fatalf("message %d: got %q, want %q (all in their order)", i, m, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d messages arrived", i, len(sent))
		}
	}
}

func TestPostgresNotify(t *testing.T) {
	p, got := listening(t)
	start := time.Now()
	if err := p.Notify(`{"job":"x"}`); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		t.Logf("notification delay %v", time.Since(start))
		if m != `{"job":"x"}` {
			t.Fatalf("got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
}
