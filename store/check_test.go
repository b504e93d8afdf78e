package store

import (
	"slices"
	"testing"
	"time"

	"marspec/api"
	"marspec/store/storetest"
)

// checkStores are the stores the check runs on: the embedded pair and a PostgreSQL + S3 pair.
var checkStores = map[string]func(t *testing.T) *Store{
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
}

// The store check finds both kinds of orphan, leaves a running job's objects alone, and its
// repair leaves a store that checks clean, with the job that lost an image queued to make it
// again.
func TestCheckFindsAndRepairsOrphans(t *testing.T) {
	for name, open := range checkStores {
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
			o, err := st.Check(0)
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
			if again, err := st.Check(0); err != nil || len(again.ObjectsWithoutRecord)+len(again.RecordsWithoutObject) != 0 {
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

// busyStore is a Blobs on which, when the store check lists the objects, a server has just
// made a job and its image and another has deleted a job (a user's DELETE): both after the
// check read the jobs.
type busyStore struct {
	Blobs
	st   *Store
	made Job
	gone string
}

func (b *busyStore) Keys(each func(key string) error) error {
	if err := b.st.CreateJob(b.made); err != nil {
		return err
	}
	if err := b.st.AddImage(Image{ID: ImageID(b.made.ID, 0), JobID: b.made.ID, ClassName: "c"}, []byte("png")); err != nil {
		return err
	}
	if err := b.st.DeleteJob(b.gone); err != nil {
		return err
	}
	return b.Blobs.Keys(each)
}

// The check on a live store: a job made and ended between its read of the jobs and its
// listing of the objects keeps its image (the repair used to delete it, leaving a succeeded
// job without bytes), and a job deleted meanwhile is no record without an object.
func TestCheckOnALiveStore(t *testing.T) {
	for name, open := range checkStores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			defer st.Close()
			gone := job("a0000000-0000-0000-0000-00000000000a", 1, api.StatusSucceeded, "target", 1)
			mustCreate(t, st, gone)
			if err := st.AddImage(Image{ID: ImageID(gone.ID, 0), JobID: gone.ID, ClassName: "c"}, []byte("png")); err != nil {
				t.Fatal(err)
			}
			made := job("b0000000-0000-0000-0000-00000000000b", 2, api.StatusSucceeded, "target", 1)
			st.Blobs = &busyStore{Blobs: st.Blobs, st: st, made: made, gone: gone.ID}
			o, err := st.Check(0)
			if err != nil {
				t.Fatal(err)
			}
			if len(o.ObjectsWithoutRecord)+len(o.RecordsWithoutObject) != 0 {
				t.Errorf("orphans found on a live store: %+v", o)
			}
			if err := st.Repair(o); err != nil {
				t.Fatal(err)
			}
			if _, err := st.ImagePNG(ImageID(made.ID, 0)); err != nil {
				t.Errorf("the image of the job made during the check: %v", err)
			}
			if j, err := st.Job(made.ID); err != nil || j.Status != api.StatusSucceeded {
				t.Errorf("the job made during the check: %s %v", j.Status, err)
			}
		})
	}
}

// A job whose retention ended less than the sweep's grace ago is not expired to the check
// either (a download begun before its expiry may still be running): the repair keeps it. Past
// the grace it is, as the sweep's list says.
func TestCheckGivesTheSweepsGrace(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const grace = time.Hour
	ended := time.Now().Add(-time.Minute - time.Second) // retention of a minute: ended a second ago
	j := job("a0000000-0000-0000-0000-00000000000a", 0, api.StatusSucceeded, "target", 1)
	j.Finished, j.Retain = &ended, time.Minute
	mustCreate(t, st, j)
	if err := st.AddImage(Image{ID: ImageID(j.ID, 0), JobID: j.ID, ClassName: "c"}, []byte("png")); err != nil {
		t.Fatal(err)
	}
	o, err := st.Check(grace)
	if err != nil || len(o.Expired) != 0 {
		t.Fatalf("within the grace: %+v %v", o, err)
	}
	if err := st.Repair(o); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ImagePNG(ImageID(j.ID, 0)); err != nil {
		t.Errorf("the repair removed a job within the grace: %v", err)
	}
	swept, err := st.Expired(SweepCut(time.Now(), grace), 10)
	if err != nil || len(swept) != 0 {
		t.Errorf("the sweep's list within the grace: %v %v", ids(swept), err)
	}
	if o, err := st.Check(time.Second / 2); err != nil || !slices.Equal(o.Expired, []string{j.ID}) {
		t.Errorf("past the grace: %+v %v", o, err)
	}
}
