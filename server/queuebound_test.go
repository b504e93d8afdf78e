package server

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"marspec/store"
)

// Replicas admitting at once into a shared queue keep its bound exactly: two replicas that
// claim nothing (their claim holds until the test ends) get 24 POSTs at once for a queue of
// 3; three are accepted, the rest answered 503. Counting the waiting jobs before the insert let
// several replicas' requests all pass the count.
func TestSharedQueueBoundHoldsAcrossReplicas(t *testing.T) {
	sh := newShared(t, "files")
	noClaims := make(chan struct{})
	reps := make([]*testServer, 2)
	for i := range reps {
		meta, err := store.OpenPostgres(sh.dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := &hookedQueue{Postgres: meta, claim: func() { <-noClaims }}
		cfg := testConfig()
		cfg.Lease, cfg.QueueSize = time.Second, 3
		reps[i] = startLogged(t, store.New(q, sh.blobs(t)), "", false, cfg, io.Discard)
	}
	t.Cleanup(func() { close(noClaims) }) // before the replicas stop (cleanups run last first)
	const posts = 24
	codes := make([]int, posts)
	var wg sync.WaitGroup
	for i := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = reps[i%len(reps)].call(t, "POST", "/v1/generations", `{"class":"1","mode":"draft"}`).code
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[http.StatusAccepted] != 3 || count[http.StatusServiceUnavailable] != posts-3 {
		t.Errorf("answers %v to %d POSTs at once for a shared queue of 3; want 3 accepted, the rest 503", count, posts)
	}
}
