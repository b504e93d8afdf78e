package server

import (
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
)

// heldBlobs holds every write until opened, counting how many wait at once.
type heldBlobs struct {
	store.Blobs
	open     chan struct{}
	mu       sync.Mutex
	inFlight int
	most     int
}

func (b *heldBlobs) Put(key string, data []byte) error {
	b.mu.Lock()
	b.inFlight++
	b.most = max(b.most, b.inFlight)
	b.mu.Unlock()
	<-b.open
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	return b.Blobs.Put(key, data)
}

func (b *heldBlobs) waiting() (now, most int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight, b.most
}

// A replica writes the images one step finishes side by side, sharedWriters at a time and
// never more; the embedded store writes them one at a time. Either way their events reach a
// stream in index order.
func TestStepImagesStoredSideBySideAnnouncedInOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writers int
		open    func(t *testing.T, blobs func(store.Blobs) store.Blobs, cfg Config) *testServer
	}{
		{"embedded", 1, func(t *testing.T, blobs func(store.Blobs) store.Blobs, cfg Config) *testServer {
			dir := t.TempDir()
			st, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			st.Blobs = blobs(st.Blobs)
			return startWith(t, st, dir, false, cfg)
		}},
		{"replica", sharedWriters, func(t *testing.T, blobs func(store.Blobs) store.Blobs, cfg Config) *testServer {
			sh := newShared(t, "files")
			files := sh.blobs(t)
			sh.blobs = func(*testing.T) store.Blobs { return blobs(files) }
			return sh.replica(t, false, func(c *Config) { c.MaxBatch = cfg.MaxBatch })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held *heldBlobs
			cfg := testConfig()
			cfg.MaxBatch = 8 // the job's 8 images in one step, finished together
			ts := tc.open(t, func(b store.Blobs) store.Blobs {
				held = &heldBlobs{Blobs: b, open: make(chan struct{})}
				return held
			}, cfg)
			opened := false
			defer func() {
				if !opened {
					close(held.open)
				}
			}()
			twoSteps := 2
			g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"2"}, N: 8, Mode: "target", NumIter: &twoSteps, Seed: seed(9)}, 0)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				if now, _ := held.waiting(); now >= tc.writers || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // a writer beyond the bound would be waiting by now
			if now, most := held.waiting(); now != tc.writers || most != tc.writers {
				t.Fatalf("%d image writes waiting (at most %d at once), want %d", now, most, tc.writers)
			}
			var order []int
			final, err := ts.client.Events(t.Context(), g.ID, func(ev api.Event) error {
				switch ev.Type {
				case "generation":
					if !opened { // subscribed before any image was stored: every image comes as an event
						opened = true
						close(held.open)
					}
				case "image":
					order = append(order, ev.Image.Index)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if final.Status != api.StatusSucceeded || len(final.Images) != 8 {
				t.Fatalf("final %s with %d images, want succeeded with 8", final.Status, len(final.Images))
			}
			for i, idx := range order {
				if idx != i || len(order) != 8 {
					t.Fatalf("image events in the order %v, want 0 to 7", order)
				}
			}
		})
	}
}
