package server

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
)

// The server stops mid-run (and a job is left behind as by a crash, with a request the models
// no longer accept): on the next start every accepted job finishes or fails with a reason,
// and images stored before the restart are still served, unchanged.
func TestRestartResumesOrFailsEveryJob(t *testing.T) {
	dir := t.TempDir()
	one := start(t, dir, false, func(c *Config) { c.MaxBatch = 2 })
	ctx := t.Context()
	before, err := one.client.Generate(ctx, api.GenerateRequest{Class: api.Classes{"0"}, Mode: "target", Seed: seed(1)}, 15*time.Second)
	if err != nil || before.Status != api.StatusSucceeded {
		t.Fatalf("%+v %v", before, err)
	}
	// Stop the scheduler from inside the first stored image of the first job (after all three
	// are submitted): its worker ends after this step, leaving that job half made, the next
	// queued, the spec job wherever it is.
	held, submitted := make(chan struct{}), make(chan struct{})
	var firstID string
	var once sync.Once
	one.afterImage = func(job string, _ int) {
		<-submitted
		if job == firstID {
			once.Do(func() {
				one.sched.Close()
				close(held)
			})
		}
	}
	var ids []string
	for _, r := range []api.GenerateRequest{
		{Class: api.Classes{"1"}, N: 5, Mode: "target", Seed: seed(3)},
		{Class: api.Classes{"2"}, N: 2, Mode: "target", Seed: seed(4)},
		{Class: api.Classes{"0", "1"}, N: 2, Mode: "spec", Seed: seed(5)},
	} {
		g, err := one.client.Generate(ctx, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	firstID = ids[0]
	close(submitted)
	<-held
	one.stop(t)

	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	half, err := st.Images(ids[0])
	if err != nil || len(half) == 0 || len(half) == 5 {
		t.Fatalf("the first job should be half made: %d images, %v", len(half), err)
	}
	kept, err := st.ImagePNG(half[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := st.Job(ids[0]); j.Status != api.StatusRunning {
		t.Fatalf("interrupted job is %s", j.Status)
	}
	// A job a crash left running whose request the models no longer accept (class 7 of 3).
	crashed := store.Job{ID: "0e0c7c1a-7d43-4b0b-9e55-6e4b2d3a1f00", Created: time.Now(), Status: api.StatusRunning,
		Request: api.GenerateRequest{Class: api.Classes{"7"}, Mode: "target", Seed: seed(1)}, Settings: api.Settings{Mode: "target", Classes: []int{7}}}
	if err := st.CreateJob(crashed); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// A smaller queue than the jobs left: accepted jobs are resumed all the same.
	two := start(t, dir, false, func(c *Config) { c.MaxBatch, c.QueueSize = 2, 1 })
	resumed, failed, err := two.Resume()
	if err != nil || failed != 1 || resumed < 2 {
		t.Fatalf("resume: %d resumed, %d failed, %v", resumed, failed, err)
	}
	for _, id := range ids {
		g, err := two.client.Generation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !g.Ended() {
			g = two.waitEnd(t, id)
		}
		if g.Status != api.StatusSucceeded || len(g.Images) != len(g.Settings.Classes) {
			t.Errorf("job %s after restart: %s %q, %d images", id, g.Status, g.Error, len(g.Images))
		}
	}
	g, err := two.client.Generation(ctx, crashed.ID)
	if err != nil || g.Status != api.StatusFailed || !strings.Contains(g.Error, "class") {
		t.Errorf("crashed job: %+v %v", g, err)
	}
	served, err := two.client.Image(ctx, half[0].ID)
	if err != nil || !bytes.Equal(served, kept) {
		t.Errorf("an image stored before the restart changed or is gone: %v", err)
	}
	if _, err := two.client.Image(ctx, before.Images[0].URL); err != nil {
		t.Errorf("a job finished before the restart lost its image: %v", err)
	}
	list, _ := two.client.List(context.Background(), api.ListOptions{})
	for _, g := range list.Generations {
		if !g.Ended() {
			t.Errorf("job %s still %s", g.ID, g.Status)
		}
	}
}
