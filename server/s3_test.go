package server

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
	"marspec/store/storetest"
)

// The image store on S3 (a real versitygw; skipped with the reason where it is not
// installed, unless MARSPEC_REQUIRE_S3=1), under the embedded database.

func startS3(t *testing.T, s3 *storetest.S3Server, held bool) *testServer {
	t.Helper()
	meta, err := store.OpenSQLite(filepath.Join(t.TempDir(), "marspec.db"))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := store.OpenS3(s3.URL("images"))
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, store.New(meta, blobs), "", held, testConfig())
}

// An image whose object is gone answers the JSON 404, not a 500.
func TestS3MissingObjectIsJSON404(t *testing.T) {
	s3 := storetest.S3(t)
	ts := startS3(t, s3, false)
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Mode: "target", Seed: seed(1)}, 15*time.Second)
	if err != nil || g.Status != api.StatusSucceeded {
		t.Fatalf("%+v %v", g, err)
	}
	if _, err := ts.client.Image(t.Context(), g.Images[0].URL); err != nil {
		t.Fatal(err)
	}
	other, err := store.OpenS3(s3.URL("images"))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteJob(g.ID); err != nil {
		t.Fatal(err)
	}
	a := ts.call(t, "GET", g.Images[0].URL, "")
	var body api.ErrorBody
	if a.code != http.StatusNotFound || json.Unmarshal(a.body, &body) != nil || !strings.Contains(body.Error, "missing") {
		t.Fatalf("GET of a lost object: %d %s", a.code, a.body)
	}
}

// S3 stops mid-run: the job waits for it instead of failing, the server keeps serving (an
// image answers 503 meanwhile), and once S3 is back the job succeeds with every image.
func TestS3StoppedMidRunIsWaitedOut(t *testing.T) {
	s3 := storetest.S3(t)
	ts := startS3(t, s3, true)
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 12, Mode: "target", Seed: seed(2)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, ts.gate.stored, "the first image")
	s3.Stop()
	ts.gate.release()
	time.Sleep(2 * time.Second)
	if err := ts.client.Health(t.Context()); err != nil {
		t.Fatalf("the server stopped serving: %v", err)
	}
	if mid, err := ts.client.Generation(t.Context(), g.ID); err != nil || mid.Ended() {
		t.Fatalf("with S3 away for 2 s the job ended: %+v %v", mid, err)
	}
	s3.Start(t)
	final := ts.waitEnd(t, g.ID)
	if final.Status != api.StatusSucceeded || len(final.Images) != 12 {
		t.Fatalf("after S3 came back: %s %q with %d of 12 images", final.Status, final.Error, len(final.Images))
	}
	for _, im := range final.Images {
		if _, err := ts.client.Image(t.Context(), im.URL); err != nil {
			t.Errorf("image record %s without its bytes: %v", im.ID, err)
		}
	}
}
