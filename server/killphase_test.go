package server

import (
	"sync"
	"testing"
	"time"
)

// kill -9 in every phase of a job: claimed but not started, mid-run, and with every image
// stored but the end not yet written. The other replica finishes each job exactly once, with
// the one-replica bytes, and the dead replica's late writes change nothing.
func TestReplicaKilledInEveryPhase(t *testing.T) {
	reqs := replicaRequests(3)
	want := reference(t, reqs)
	for _, phase := range []string{"claimed", "mid-run", "images stored"} {
		t.Run(phase, func(t *testing.T) {
			sh := newShared(t, "files")
			a := sh.replica(t, false, nil)
			stopped := make(chan struct{})
			var once sync.Once
			hold := make(chan struct{})
			release := func() {}
			switch phase {
			case "claimed":
				release = a.sched.Hold() // claimed jobs wait in the scheduler
			case "mid-run", "images stored":
				a.afterImage = func(job string, index int) {
					j, _ := a.hub.get(job)
					if phase == "mid-run" || index == j.plan.Images()-1 {
						once.Do(func() { close(stopped) })
						<-hold
					}
				}
				release = func() { close(hold) }
			}
			var ids []string
			for _, r := range reqs {
				g, err := a.client.Generate(t.Context(), r, 0)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, g.ID)
			}
			if phase == "claimed" {
				for a.sched.Depth() == 0 {
					time.Sleep(10 * time.Millisecond)
				}
			} else {
				receive(t, stopped, "the phase")
			}
			b := sh.replica(t, false, nil)
			a.crash(t)
			var woke sync.Once
			wake := func() { woke.Do(release) } // the dead replica's run wakes and writes late
			t.Cleanup(wake)
			for i, id := range ids {
				sameImages(t, b, b.waitEnd(t, id), want[i])
			}
			wake()
			time.Sleep(300 * time.Millisecond)
			for i, id := range ids { // its late writes changed nothing
				g, err := b.client.Generation(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				sameImages(t, b, g, want[i])
			}
		})
	}
}
