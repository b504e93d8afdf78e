package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"marspec/api"
	"marspec/generation"
	"marspec/scheduler"
	"marspec/store"
)

// Idempotency-Key on POST: a retry makes no second job, another request under the same key
// is refused, and two replicas receiving the same key at the same moment make one job.

// The same key and request answer with the first job, however the JSON is written; another
// request under the key is a 422 naming the job; the key is the API key's own and lasts as
// long as its job.
func TestIdempotencyKeyReturnsTheFirstJob(t *testing.T) {
	ts := keyed(t, start(t, "", false, withKeys))
	post := func(secret, idem, body string) answer {
		return ts.call(t, "POST", "/v1/generations?wait=15s", body, "Authorization", "Bearer "+secret, "Idempotency-Key", idem,
			"Content-Type", "application/json")
	}
	first := post(bobSecret, "order-17", `{"class": "trouser", "n": 2, "mode": "draft", "seed": 9}`)
	var g api.Generation
	if first.code != http.StatusOK || json.Unmarshal(first.body, &g) != nil || first.header.Get(replayedHeader) != "" {
		t.Fatalf("first POST: %d %s", first.code, first.body)
	}
	again := post(bobSecret, "order-17", `{"seed":9,"mode":"draft","n":2,"class":["Trouser"]}`)
	var g2 api.Generation
	if again.code != http.StatusOK || json.Unmarshal(again.body, &g2) != nil || g2.ID != g.ID || again.header.Get(replayedHeader) != "true" {
		t.Fatalf("the same request again: %d %s (replayed %q); want job %s", again.code, again.body, again.header.Get(replayedHeader), g.ID)
	}
	conflict := post(bobSecret, "order-17", `{"class": "trouser", "n": 3, "mode": "draft", "seed": 9}`)
	var e api.ErrorBody
	if conflict.code != http.StatusUnprocessableEntity || json.Unmarshal(conflict.body, &e) != nil || e.Field != idempotencyHeader ||
		!strings.Contains(e.Error, g.ID) {
		t.Fatalf("another request under the key: %d %s; want 422 naming job %s", conflict.code, conflict.body, g.ID)
	}
	other := post(carolSecret, "order-17", `{"class": "trouser", "n": 2, "mode": "draft", "seed": 9}`)
	if json.Unmarshal(other.body, &g2) != nil || g2.ID == g.ID || other.header.Get(replayedHeader) != "" {
		t.Fatalf("another API key with the same Idempotency-Key: %d %s; want its own job", other.code, other.body)
	}
	for _, bad := range []string{strings.Repeat("x", 256), "tab\there"} {
		if ans := post(bobSecret, bad, `{"class": 1}`); ans.code != http.StatusBadRequest || !strings.Contains(string(ans.body), idempotencyHeader) {
			t.Errorf("Idempotency-Key %q: %d %s; want 400 naming the header", bad, ans.code, ans.body)
		}
	}
	// the typed client says when an answer is a replay
	bob := ts.as(t, bobSecret)
	req := api.GenerateRequest{Class: api.Classes{"trouser"}, N: 2, Mode: "draft", Seed: seed(9)}
	if r, err := bob.Generate(t.Context(), req, 0, api.WithIdempotencyKey("order-17")); err != nil || r.ID != g.ID || !r.Replayed {
		t.Fatalf("the client's retry: %+v %v", r, err)
	}
	// once the job is deleted its key makes a new one
	if _, err := bob.Delete(t.Context(), g.ID); err != nil {
		t.Fatal(err)
	}
	if r, err := bob.Generate(t.Context(), req, 0, api.WithIdempotencyKey("order-17")); err != nil || r.ID == g.ID || r.Replayed {
		t.Fatalf("the key after its job was deleted: %+v %v; want a new job", r, err)
	}
	if page, err := bob.List(t.Context(), api.ListOptions{}); err != nil || page.Total != 1 {
		t.Errorf("bob has %+v jobs (%v); want 1: the retries made none", page, err)
	}
}

// Two replicas receiving the same Idempotency-Key at the same moment make one job: every
// answer names it, and only one of them is not a replay (PostgreSQL + S3, real servers).
func TestIdempotencyKeyAcrossReplicasMakesOneJob(t *testing.T) {
	sh := newShared(t, "s3")
	reps := []*testServer{keyed(t, sh.replica(t, false, withKeys)), keyed(t, sh.replica(t, false, withKeys))}
	const rounds, perReplica = 6, 4
	for round := range rounds {
		idem := fmt.Sprintf("round-%d", round)
		req := api.GenerateRequest{Class: api.Classes{fmt.Sprint(round % 3)}, N: 1, Mode: "draft"}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var mu sync.Mutex
		ids, made := map[string]int{}, 0
		for i := range 2 * perReplica {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := reps[i%2].as(t, bobSecret)
				<-start
				g, err := c.Generate(t.Context(), req, 0, api.WithIdempotencyKey(idem))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("round %d, replica %d: %v", round, i%2, err)
					return
				}
				ids[g.ID]++
				if !g.Replayed {
					made++
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(ids) != 1 || made != 1 {
			t.Fatalf("round %d: jobs %v, %d answers not replayed; want one job, made once", round, ids, made)
		}
	}
	page, err := reps[0].as(t, bobSecret).List(t.Context(), api.ListOptions{})
	if err != nil || page.Total != rounds {
		t.Fatalf("%d jobs stored (%v); want %d", page.Total, err, rounds)
	}
	for _, g := range page.Generations {
		if final := reps[1].waitEnd(t, g.ID); final.Status != api.StatusSucceeded {
			t.Errorf("job %s ended %s %q", g.ID, final.Status, final.Error)
		}
	}
}

// A job the scheduler refuses after it was stored (the queue filled between the check and the
// submission) is dropped even when the image store cannot delete (here its folder is a file):
// it held one of its key's max_in_flight slots until a restart, and the key got 429s meanwhile.
func TestRefusedJobFreesItsKeysSlot(t *testing.T) {
	ts := keyed(t, start(t, "", true, func(c *Config) { withKeys(c); c.QueueSize = 1 }))
	first, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Mode: "draft"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	<-ts.gate.stored // running and held: the scheduler's queue is full
	images := filepath.Join(ts.dir, "images")
	if err := os.RemoveAll(images); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(images, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "draft", Seed: seed(3)}
	plan, err := generation.Validate(req, ts.cat)
	if err != nil {
		t.Fatal(err)
	}
	late := store.Job{ID: uuid.NewString(), Created: time.Now(), Status: api.StatusQueued, Request: req, Settings: plan.Settings(), Key: "carol"}
	if _, _, err := ts.store.Admit(late, store.Limits{MaxInFlight: 1}); err != nil { // as admit stores it, past roomForJob
		t.Fatal(err)
	}
	if err := ts.enqueue(late, plan); !errors.Is(err, scheduler.ErrQueueFull) {
		t.Fatalf("submitted to a full queue: %v", err)
	}
	ts.gate.release()
	ts.waitEnd(t, first.ID) // the queue has room again
	if _, err := ts.as(t, carolSecret).Generate(t.Context(), req, 0); err != nil {
		t.Errorf("carol's POST once the queue has room, her refused job gone: %v (want 202)", err)
	}
}
