package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"marspec/api"
)

func TestJobsImagesAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(9)
	base := time.Now()
	for i, j := range []Job{
		{ID: "a", Status: api.StatusQueued, Settings: api.Settings{Mode: "target", Classes: []int{1, 12}}},
		{ID: "b", Status: api.StatusQueued, Settings: api.Settings{Mode: "spec", Classes: []int{2}}},
		{ID: "c", Status: api.StatusSucceeded, Settings: api.Settings{Mode: "spec", Classes: []int{1}}},
	} {
		j.Created = base.Add(time.Duration(i) * time.Second)
		j.Request = api.GenerateRequest{Class: api.Classes{"1"}, Seed: &seed}
		if err := s.CreateJob(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetRunning("a", base); err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG fake")
	if err := s.AddImage(Image{ID: ImageID("a", 0), JobID: "a", Index: 0, Class: 1, ClassName: "x",
		Stats: &api.ImageStats{Alpha: 0.5, AcceptedAtPos: []int{1, 2}}}, png); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir) // everything survives a reopen
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j, err := s.Job("a")
	if err != nil || j.Status != api.StatusRunning || j.Started == nil || *j.Request.Seed != 9 {
		t.Fatalf("job a: %+v %v", j, err)
	}
	imgs, err := s.Images("a")
	if err != nil || len(imgs) != 1 || imgs[0].Stats == nil || imgs[0].Stats.Alpha != 0.5 {
		t.Fatalf("images: %+v %v", imgs, err)
	}
	if got, err := s.ImagePNG("a-0"); err != nil || !bytes.Equal(got, png) {
		t.Fatalf("png: %q %v", got, err)
	}
	un, err := s.Unfinished()
	if err != nil || len(un) != 2 || un[0].ID != "a" || un[1].ID != "b" {
		t.Fatalf("unfinished: %+v %v", un, err)
	}
	one := 1
	list, total, err := s.List(Filter{Class: &one}, 10, 0)
	if err != nil || total != 2 || list[0].ID != "c" || list[1].ID != "a" {
		t.Fatalf("class 1 (not 12): %d %+v %v", total, list, err)
	}
	list, total, _ = s.List(Filter{Mode: "spec"}, 1, 1)
	if total != 2 || len(list) != 1 || list[0].ID != "b" {
		t.Fatalf("spec page 2: %d %+v", total, list)
	}
	if err := s.DeleteJob("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Job("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
	if _, err := s.ImagePNG("a-0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted image: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "images", "a")); !os.IsNotExist(err) {
		t.Fatalf("image folder left behind: %v", err)
	}
	if err := s.DeleteJob("zzz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
}

func TestWriteAtomicLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x", "1.png")
	for _, data := range []string{"one", "two"} {
		if err := writeAtomic(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(p)
	entries, _ := os.ReadDir(filepath.Dir(p))
	if string(got) != "two" || len(entries) != 1 {
		t.Fatalf("content %q, %d entries", got, len(entries))
	}
}

// The implementations satisfy the interfaces the server is written against.
var (
	_ Meta  = (*SQLite)(nil)
	_ Blobs = (*Files)(nil)
	_ Meta  = (*Postgres)(nil)
	_ Blobs = (*S3)(nil)
)

func TestFilesRefuseKeysOutsideRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "images")
	f, err := NewFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"../x.png", "/etc/passwd", "a/../../x.png", ""} {
		if err := f.Put(key, []byte("x")); err == nil {
			t.Errorf("Put(%q) accepted", key)
		}
		if _, err := f.Get(key); err == nil {
			t.Errorf("Get(%q) accepted", key)
		}
		if err := f.DeleteJob(key); err == nil {
			t.Errorf("DeleteJob(%q) accepted", key)
		}
	}
	if _, err := f.Get("job/0.png"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing blob: %v", err)
	}
}
