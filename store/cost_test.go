package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"marspec/api"
	"marspec/store/storetest"
)

// BenchmarkJobCost times what the store does for one job of 4 images, on each pair of
// implementations: create, running, 4 × (PNG of 1 KB, then its record), finish. A shared
// store also claims the job and renews its lease once.
//
//	go test -run ^$ -bench JobCost ./store/
func BenchmarkJobCost(b *testing.B) {
	pairs := []struct {
		name string
		open func(b *testing.B) *Store
	}{
		{"sqlite+files", func(b *testing.B) *Store {
			s, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"postgres+s3", func(b *testing.B) *Store {
			meta, err := OpenPostgres(storetest.Postgres(b))
			if err != nil {
				b.Fatal(err)
			}
			blobs, err := OpenS3(storetest.S3(b).URL("images"))
			if err != nil {
				b.Fatal(err)
			}
			return New(meta, blobs)
		}},
		{"postgres+files", func(b *testing.B) *Store {
			meta, err := OpenPostgres(storetest.Postgres(b))
			if err != nil {
				b.Fatal(err)
			}
			blobs, err := NewFiles(filepath.Join(b.TempDir(), "images"))
			if err != nil {
				b.Fatal(err)
			}
			return New(meta, blobs)
		}},
	}
	png := make([]byte, 1000)
	for _, p := range pairs {
		b.Run(p.name, func(b *testing.B) {
			s := p.open(b)
			defer s.Close()
			q, shared := s.Meta.(Queue)
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprintf("job-%d", i)
				j := Job{ID: id, Created: time.Now(), Status: api.StatusQueued, Settings: api.Settings{Mode: "target", Classes: []int{1, 2, 3, 4}}}
				if err := s.CreateJob(j); err != nil {
					b.Fatal(err)
				}
				var hold Hold
				if shared {
					claimed, ok, err := q.Claim("bench", time.Minute, "cancelled")
					if !ok || err != nil {
						b.Fatal(ok, err)
					}
					hold = Hold{"bench", claimed.Attempt}
				}
				if err := s.SetRunning(id, time.Now()); err != nil {
					b.Fatal(err)
				}
				for k := range 4 {
					if err := s.AddImage(Image{ID: ImageID(id, k), JobID: id, Index: k, ClassName: "c"}, png); err != nil {
						b.Fatal(err)
					}
				}
				if shared {
					if _, _, err := q.Renew("bench", map[string]int{id: hold.Attempt}, time.Minute); err != nil {
						b.Fatal(err)
					}
					if ok, err := q.FinishOwned(hold, id, api.StatusSucceeded, "", time.Now()); !ok || err != nil {
						b.Fatal(ok, err)
					}
				} else if err := s.Finish(id, api.StatusSucceeded, "", time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
