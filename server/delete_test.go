package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"marspec/api"
	"marspec/store"
	"marspec/store/storetest"
)

// A DELETE of a job running on the replica that receives it is in the database before the
// 202: were the replica to die before its next step, the replica that takes the job over
// must end it as cancelled, not finish it.
func TestDeleteIsRecordedBeforeItIsAcknowledged(t *testing.T) {
	sh := newShared(t, "files")
	a := sh.replica(t, true, nil)
	g, err := a.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 3, Mode: "draft", Seed: seed(8)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, a.gate.stored, "the first image") // running here, held mid-run
	if ans := a.call(t, "DELETE", "/v1/generations/"+g.ID, ""); ans.code != http.StatusAccepted {
		t.Fatalf("DELETE: %d %s", ans.code, ans.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, sh.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var asked bool
	if err := conn.QueryRow(ctx, `SELECT cancel_requested FROM jobs WHERE id = $1`, g.ID).Scan(&asked); err != nil {
		t.Fatal(err)
	}
	if !asked {
		t.Fatal("DELETE acknowledged with 202 while the database does not know of it")
	}
	a.crash(t) // dies before its next step; B takes the job over and must honour the DELETE
	b := sh.replica(t, false, nil)
	if final := b.waitEnd(t, g.ID); final.Status != api.StatusCancelled {
		t.Fatalf("a job DELETEd before its replica died ended %s", final.Status)
	}
}

// The object store is down during a DELETE of a finished job: 503, and the job and its images
// are all still there; once it is back, a DELETE removes job and objects.
func TestDeleteDuringImageStoreOutageKeepsTheJob(t *testing.T) {
	s3 := storetest.S3(t)
	ts := startS3(t, s3, false)
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Mode: "draft", Seed: seed(4)}, 15*time.Second)
	if err != nil || g.Status != api.StatusSucceeded {
		t.Fatalf("%+v %v", g, err)
	}
	s3.Stop()
	isOutageAnswer(t, "DELETE", ts.call(t, "DELETE", "/v1/generations/"+g.ID, ""), "image store")
	s3.Start(t)
	for _, im := range g.Images {
		if _, err := ts.client.Image(t.Context(), im.URL); err != nil {
			t.Fatalf("a DELETE that answered 503 removed image %s: %v", im.ID, err)
		}
	}
	if a := ts.call(t, "DELETE", "/v1/generations/"+g.ID, ""); a.code != http.StatusNoContent {
		t.Fatalf("DELETE after the outage: %d %s", a.code, a.body)
	}
	if _, err := ts.store.Blobs.Get(g.ID + "/0.png"); err == nil {
		t.Fatal("the deleted job's object is still stored")
	}
}

// Objects left under a job id with no record (an earlier failure, a late writer) go with the
// next DELETE of that id, which still answers 404.
func TestDeleteRemovesLeftoverObjects(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) *testServer{
		"sqlite": func(t *testing.T) *testServer { return start(t, "", false, nil) },
		"shared": func(t *testing.T) *testServer { return newShared(t, "files").replica(t, false, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			ts := open(t)
			id := "5b7c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"
			if err := ts.store.Blobs.Put(id+"/0.png", []byte("left")); err != nil {
				t.Fatal(err)
			}
			if a := ts.call(t, "DELETE", "/v1/generations/"+id, ""); a.code != http.StatusNotFound {
				t.Fatalf("DELETE of a job without a record: %d %s", a.code, a.body)
			}
			if _, err := ts.store.Blobs.Get(id + "/0.png"); err == nil {
				t.Fatal("the leftover object is still there")
			} else if !errors.Is(err, store.ErrNotFound) {
				t.Fatal(err)
			}
		})
	}
}

// A single server records the cancellation of a running job before its 202 as well: a
// restart before the run stops ends the job cancelled instead of resuming and finishing it.
func TestDeleteOfARunningJobSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	ts := start(t, dir, true, nil)
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 12, Mode: "draft", Seed: seed(12)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, ts.gate.stored, "the first image") // running, held mid-run
	if a := ts.call(t, "DELETE", "/v1/generations/"+g.ID, ""); a.code != http.StatusAccepted {
		t.Fatalf("DELETE: %d %s", a.code, a.body)
	}
	ts.sched.Close() // the process stops before the run does: the job stays unfinished
	ts.stop(t)
	again := start(t, dir, false, nil)
	if _, _, err := again.Resume(); err != nil {
		t.Fatal(err)
	}
	if final, err := again.client.Generation(t.Context(), g.ID); err != nil || final.Status != api.StatusCancelled {
		t.Fatalf("after a restart the DELETEd job is %+v (%v), want cancelled", final, err)
	}
}
