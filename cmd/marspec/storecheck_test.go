package main

import (
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
)

// marspec store check reports orphans with a non-zero exit and a hint; --repair removes
// them, and the store then checks clean.
func TestStoreCheckAndRepair(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := "a0000000-0000-0000-0000-00000000000a"
	if err := st.CreateJob(store.Job{ID: id, Created: time.Now(), Status: api.StatusSucceeded, Settings: api.Settings{Mode: "target", Classes: []int{1}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Blobs.Put(id+"/3.png", []byte("left")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := runStore([]string{"check", "--data-dir", dir}); err == nil || !strings.Contains(err.Error(), "1 orphans (marspec store check --repair") {
		t.Fatalf("check of a store with an orphan: %v", err)
	}
	if err := runStore([]string{"check", "--repair", "--data-dir", dir}); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if err := runStore([]string{"check", "--data-dir", dir}); err != nil {
		t.Fatalf("after the repair: %v", err)
	}
	if err := runStore([]string{"audit"}); err == nil || !strings.Contains(err.Error(), "usage: marspec store check") {
		t.Errorf("unknown subcommand: %v", err)
	}
}

// An expired job not swept yet is no orphan (exit 0, named as waiting for the sweep); --repair
// removes it, objects and record, once the sweep's grace (--write-timeout) has passed too.
func TestStoreCheckLeavesExpiredToTheSweep(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := "b0000000-0000-0000-0000-00000000000b"
	ended := time.Now().Add(-time.Hour)
	if err := st.CreateJob(store.Job{ID: id, Created: ended, Finished: &ended, Status: api.StatusSucceeded, Retain: time.Minute,
		Settings: api.Settings{Mode: "target", Classes: []int{1}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Blobs.Put(id+"/0.png", []byte("png")); err != nil { // its record already removed by a sweep cut short
		t.Fatal(err)
	}
	st.Close()
	if err := runStore([]string{"check", "--data-dir", dir}); err != nil {
		t.Fatalf("check of a store with an expired job: %v", err)
	}
	// within the servers' grace (their --write-timeout) it is not expired yet: kept
	if err := runStore([]string{"check", "--repair", "--write-timeout", "2h", "--data-dir", dir}); err != nil {
		t.Fatalf("repair within the grace: %v", err)
	}
	if st, err = store.Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Job(id); err != nil {
		t.Errorf("the repair removed a job within the servers' grace: %v", err)
	}
	st.Close()
	if err := runStore([]string{"check", "--repair", "--data-dir", dir}); err != nil {
		t.Fatalf("repair: %v", err)
	}
	st, err = store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Job(id); err == nil {
		t.Error("the expired job is still there after --repair")
	}
	if _, err := st.Blobs.Get(id + "/0.png"); err == nil {
		t.Error("its object is still there after --repair")
	}
}
