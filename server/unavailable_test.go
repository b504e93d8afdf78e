package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/store/storetest"
)

// A request that meets a store outage is a 503 with Retry-After and a JSON reason naming the
// store, never a 500, and never the driver's message (hosts, ports, "dial tcp").

// isOutageAnswer checks one answer given while the named store ("database", "image store")
// was down.
func isOutageAnswer(t *testing.T, what string, a answer, storeName string) {
	t.Helper()
	var body api.ErrorBody
	if err := json.Unmarshal(a.body, &body); err != nil || a.code != http.StatusServiceUnavailable {
		t.Errorf("%s during an outage of the %s: %d %s (%v); want 503 with a JSON reason", what, storeName, a.code, a.body, err)
		return
	}
	if a.header.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After", what)
	}
	if !strings.Contains(body.Error, "the "+storeName+" is unavailable") {
		t.Errorf("%s: reason %q does not name the %s", what, body.Error, storeName)
	}
	for _, leak := range []string{"127.0.0.1", "dial", "tcp", "localhost", ":5432"} {
		if strings.Contains(body.Error, leak) {
			t.Errorf("%s: reason %q shows an internal address (%q)", what, body.Error, leak)
		}
	}
}

// The shared PostgreSQL database goes away: creating, listing, reading and deleting jobs all
// answer 503, and the same requests succeed once it is back.
func TestDatabaseOutageIs503(t *testing.T) {
	sh := newShared(t, "files")
	ts := sh.replica(t, false, func(c *Config) { c.Lease = 10 * time.Second })
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Mode: "draft", Seed: seed(3)}, 15*time.Second)
	if err != nil || g.Status != api.StatusSucceeded {
		t.Fatalf("%+v %v", g, err)
	}
	back := make(chan struct{})
	go func() { defer close(back); storetest.Outage(t, sh.dsn, 3*time.Second) }()
	time.Sleep(500 * time.Millisecond) // the connections are cut by now
	isOutageAnswer(t, "POST", ts.call(t, "POST", "/v1/generations", `{"class":"1","mode":"draft"}`), "database")
	isOutageAnswer(t, "GET list", ts.call(t, "GET", "/v1/generations", ""), "database")
	isOutageAnswer(t, "GET job", ts.call(t, "GET", "/v1/generations/"+g.ID, ""), "database")
	isOutageAnswer(t, "GET image", ts.call(t, "GET", g.Images[0].URL, ""), "database")
	isOutageAnswer(t, "DELETE", ts.call(t, "DELETE", "/v1/generations/"+g.ID, ""), "database")
	<-back
	if _, err := ts.client.Generation(t.Context(), g.ID); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
}

// The object store goes away: an image and a grid answer 503.
func TestImageStoreOutageIs503(t *testing.T) {
	s3 := storetest.S3(t)
	ts := startS3(t, s3, false)
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Mode: "draft", Seed: seed(4)}, 15*time.Second)
	if err != nil || g.Status != api.StatusSucceeded {
		t.Fatalf("%+v %v", g, err)
	}
	s3.Stop()
	isOutageAnswer(t, "GET image", ts.call(t, "GET", g.Images[0].URL, ""), "image store")
	isOutageAnswer(t, "GET grid", ts.call(t, "GET", g.Links.Grid, ""), "image store")
}

// The embedded database failing (here: closed under the server) is a 503 as well.
func TestEmbeddedDatabaseFailureIs503(t *testing.T) {
	ts := start(t, "", false, nil)
	if err := ts.store.Meta.Close(); err != nil {
		t.Fatal(err)
	}
	isOutageAnswer(t, "GET list", ts.call(t, "GET", "/v1/generations", ""), "database")
	isOutageAnswer(t, "POST", ts.call(t, "POST", "/v1/generations", `{"class":"1","mode":"draft"}`), "database")
}

// An image store that refuses for good (here the image folder is a file: "not a directory";
// permission denied or a missing bucket alike) fails the job with the reason, without the
// folder's path; it is no outage to wait out, which held the job running forever.
func TestRefusingImageStoreFailsTheJob(t *testing.T) {
	ts := start(t, "", false, nil)
	images := filepath.Join(ts.dir, "images")
	if err := os.RemoveAll(images); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(images, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Mode: "draft", Seed: seed(5)}, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != api.StatusFailed || !strings.Contains(g.Error, "the image store refused the request (not a directory)") {
		t.Fatalf("job %s with error %q; want failed, naming the refusal", g.Status, g.Error)
	}
	if strings.Contains(g.Error, ts.dir) {
		t.Errorf("the job's error shows the image folder's path: %q", g.Error)
	}
}
