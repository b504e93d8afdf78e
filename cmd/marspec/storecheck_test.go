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
