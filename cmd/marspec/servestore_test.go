package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad --store or --blobs (flag or variable) stops serve with one line naming it, before
// any model or the data folder is opened.
func TestServeRefusesBadStoreURLs(t *testing.T) {
	for _, c := range []struct {
		args  []string
		store string
		want  string
	}{
		{[]string{"--store", "mysql://db"}, "", "--store mysql://db: unknown kind of store"},
		{[]string{"--blobs", "gs://bucket"}, "", "--blobs gs://bucket: unknown kind of image store"},
		{nil, "redis://x", "--store redis://x: unknown kind of store"},
	} {
		t.Setenv("MARSPEC_STORE", c.store)
		data := filepath.Join(t.TempDir(), "data")
		err := runServe(append([]string{"--addr", "127.0.0.1:0", "--data-dir", data}, c.args...))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v MARSPEC_STORE=%q: %v; want one line starting %q", c.args, c.store, err, c.want)
		}
		if _, serr := os.Stat(data); serr == nil {
			t.Errorf("%v: the data folder was made", c.args)
		}
	}
}
