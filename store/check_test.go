package store

import (
	"slices"
	"testing"

	"marspec/api"
	"marspec/store/storetest"
)

// The store check finds both kinds of orphan, leaves a running job's objects alone, and its
// repair leaves a store that checks clean, with the job that lost an image queued to make it
// again.
func TestCheckFindsAndRepairsOrphans(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) *Store{
		"sqlite+files": func(t *testing.T) *Store {
			st, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"postgres+s3": func(t *testing.T) *Store {
			meta, err := OpenPostgres(storetest.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			blobs, err := OpenS3(storetest.S3(t).URL("check"))
			if err != nil {
				t.Fatal(err)
			}
			return New(meta, blobs)
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			defer st.Close()
			done := job("a0000000-0000-0000-0000-00000000000a", 1, api.StatusSucceeded, "target", 1, 2)
			busy := job("c0000000-0000-0000-0000-00000000000c", 2, api.StatusRunning, "target", 1)
			mustCreate(t, st, done, busy)
			for i := range 2 {
				if err := st.AddImage(Image{ID: ImageID(done.ID, i), JobID: done.ID, Index: i, ClassName: "c"}, []byte("png")); err != nil {
					t.Fatal(err)
				}
			}
			for _, key := range []string{done.ID + "/5.png", "b0000000-0000-0000-0000-00000000000b/0.png", busy.ID + "/0.png"} {
				if err := st.Blobs.Put(key, []byte("png")); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Blobs.Delete(done.ID + "/1.png"); err != nil {
				t.Fatal(err)
			}
			o, err := st.Check()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(o.ObjectsWithoutRecord)
			if !slices.Equal(o.ObjectsWithoutRecord, []string{done.ID + "/5.png", "b0000000-0000-0000-0000-00000000000b/0.png"}) ||
				!slices.Equal(o.RecordsWithoutObject, []string{ImageID(done.ID, 1)}) {
				t.Fatalf("found %+v", o)
			}
			if err := st.Repair(o); err != nil {
				t.Fatal(err)
			}
			if again, err := st.Check(); err != nil || len(again.ObjectsWithoutRecord)+len(again.RecordsWithoutObject) != 0 {
				t.Fatalf("after the repair: %+v %v", again, err)
			}
			if j, _ := st.Job(done.ID); j.Status != api.StatusQueued {
				t.Errorf("the job that lost an image is %s, want queued to make it again", j.Status)
			}
			if _, err := st.Blobs.Get(busy.ID + "/0.png"); err != nil {
				t.Errorf("the running job's object was removed: %v", err)
			}
		})
	}
}
