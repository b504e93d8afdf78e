package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"marspec/store/storetest"
)

// The Blobs conformance suite: the same cases on files and on a real S3 server (versitygw,
// skipped with the reason where it is not installed, unless MARSPEC_REQUIRE_S3=1).

var blobImpls = []struct {
	name string
	open func(t *testing.T) Blobs
}{
	{"files", func(t *testing.T) Blobs {
		f, err := NewFiles(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}},
	{"s3", func(t *testing.T) Blobs {
		b, err := OpenS3(storetest.S3(t).URL("images"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
}

func TestBlobsConformance(t *testing.T) {
	for _, impl := range blobImpls {
		t.Run(impl.name, func(t *testing.T) {
			b := impl.open(t) // one server for the cases: they use distinct jobs
			for _, c := range []struct {
				name string
				run  func(t *testing.T, b Blobs)
			}{
				{"put get and put again", caseBlobRoundTrip},
				{"missing is not found", caseBlobMissing},
				{"delete takes one job", caseBlobDelete},
				{"keys stay inside", caseBlobKeys},
			} {
				t.Run(c.name, func(t *testing.T) { c.run(t, b) })
			}
		})
	}
}

func caseBlobRoundTrip(t *testing.T, b Blobs) {
	png := bytes.Repeat([]byte("\x89PNG-"), 2000)
	for range 2 { // a resumed job writes the same key again
		if err := b.Put("rt/0.png", png); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Get("rt/0.png")
	if err != nil || !bytes.Equal(got, png) {
		t.Fatalf("got %d bytes, %v", len(got), err)
	}
	if err := b.Put("rt/1.png", nil); err != nil { // empty is a blob too
		t.Fatal(err)
	}
	if got, err := b.Get("rt/1.png"); err != nil || len(got) != 0 {
		t.Fatalf("empty blob: %q %v", got, err)
	}
}

func caseBlobMissing(t *testing.T, b Blobs) {
	if _, err := b.Get("nojob/0.png"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing blob: %v", err)
	}
	if err := b.DeleteJob("nojob"); err != nil {
		t.Fatalf("deleting a job with no blobs: %v", err)
	}
}

func caseBlobDelete(t *testing.T, b Blobs) {
	for _, k := range []string{"del/0.png", "del/1.png", "del2/0.png", "delx/0.png"} {
		if err := b.Put(k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.DeleteJob("del"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"del/0.png", "del/1.png"} {
		if _, err := b.Get(k); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s after DeleteJob: %v", k, err)
		}
	}
	for _, k := range []string{"del2/0.png", "delx/0.png"} { // a job whose id starts the same stays
		if got, err := b.Get(k); err != nil || string(got) != k {
			t.Errorf("%s: %q %v", k, got, err)
		}
	}
}

func caseBlobKeys(t *testing.T, b Blobs) {
	for _, key := range []string{"../x.png", "/etc/passwd", "a/../../x.png", ""} {
		if err := b.Put(key, []byte("x")); err == nil {
			t.Errorf("Put(%q) accepted", key)
		}
		if _, err := b.Get(key); err == nil {
			t.Errorf("Get(%q) accepted", key)
		}
		if err := b.DeleteJob(key); err == nil {
			t.Errorf("DeleteJob(%q) accepted", key)
		}
	}
}

func TestOpenS3RefusesBadURLs(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	for _, c := range []struct{ url, want string }{
		{"http://bucket", "not an S3 URL"},
		{"s3://", "not an S3 URL"},
		{"s3://b/extra/path", "not an S3 URL"},
		{"s3://k:s@b?endpoint=http://h:1&bucket=x", `unknown parameter "bucket"`},
		{"s3://k:s@b?endpoint=ftp://h:1", "endpoint"},
		{"s3://b?endpoint=http://127.0.0.1:1", "no credentials"},
		{"s3://k:s@b?endpoint=http://127.0.0.1:1", "bucket b at http://127.0.0.1:1"},
	} {
		_, err := OpenS3(c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenS3(%q) = %v, want an error with %q", c.url, err, c.want)
		}
	}
}

// Replicas started together all find no bucket and all make it; every one of them must open.
// Eight openers meet at a barrier before each of five fresh buckets, so their checks and makes
// overlap (without the race handled, a CI image check once lost a replica this way).
func TestOpenS3ReplicasMakeTheBucketTogether(t *testing.T) {
	server := storetest.S3(t)
	const openers = 8
	for round := range 5 {
		url := server.URL(fmt.Sprintf("together-%d", round))
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, openers)
		for i := range openers {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-start
				_, errs[i] = OpenS3(url)
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("bucket together-%d, opener %d: %v", round, i, err)
			}
		}
	}
}

// A store that refuses for good is ErrRefused, not ErrUnavailable (a run waits out only the
// latter): an image folder that is a file, an S3 bucket deleted under the server. A stopped S3
// server stays unavailable.
func TestBlobsRefusedIsNotUnavailable(t *testing.T) {
	root := filepath.Join(t.TempDir(), "images")
	f, err := NewFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, []byte("a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	isRefused(t, "files over a file", f.Put("job/0.png", []byte("png")))

	s3 := storetest.S3(t)
	b, err := OpenS3(s3.URL("refused"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.c.RemoveBucket(t.Context(), "refused"); err != nil {
		t.Fatal(err)
	}
	isRefused(t, "S3 without its bucket", b.Put("job/0.png", []byte("png")))
	s3.Stop()
	if err := b.Put("job/0.png", []byte("png")); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused) {
		t.Errorf("S3 stopped: %v; want unavailable", err)
	}
}

func isRefused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrUnavailable) {
		t.Errorf("%s: %v; want refused, not unavailable", what, err)
	}
}
