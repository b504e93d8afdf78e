package server

import (
	"testing"
	"time"

	"marspec/api"
)

// A queue deadline fails a job that has not started, with its reason and error code, even
// while no slot frees up (the only slot is held by a job mid-run): in a server's own queue and
// in the shared one. A job that starts in time is not touched by its deadline.

func timeoutRequest(seconds float64) api.GenerateRequest {
	return api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "target", Seed: seed(3), QueueTimeout: &seconds}
}

// deadlineMissed posts a job with a short queue_timeout behind a job that holds the only
// slot, and checks that it fails on time with the reason.
func deadlineMissed(t *testing.T, ts *testServer) {
	t.Helper()
	first, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Mode: "target", Seed: seed(1)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, ts.gate.stored, "the first job's first image") // it holds the only slot from now on
	late, err := ts.client.Generate(t.Context(), timeoutRequest(0.3), 0)
	if err != nil {
		t.Fatal(err)
	}
	g := ts.waitEnd(t, late.ID)
	if g.Status != api.StatusFailed || g.ErrorCode != api.QueueDeadlineExceeded || g.Started != nil || g.QueueDeadline == nil {
		t.Fatalf("late job: %s code %q error %q started %v deadline %v", g.Status, g.ErrorCode, g.Error, g.Started, g.QueueDeadline)
	}
	if took := g.Finished.Sub(*g.QueueDeadline); took < 0 || took > 2*time.Second {
		t.Errorf("failed %v after its deadline, want within the sweep's interval", took)
	}
	t.Logf("failed %v after its deadline: %q", g.Finished.Sub(*g.QueueDeadline), g.Error)
	ts.gate.release()
	if g := ts.waitEnd(t, first.ID); g.Status != api.StatusSucceeded {
		t.Errorf("the first job: %s %q", g.Status, g.Error)
	}
	inTime, err := ts.client.Generate(t.Context(), timeoutRequest(30), 10*time.Second)
	if err != nil || inTime.Status != api.StatusSucceeded || inTime.ErrorCode != "" {
		t.Errorf("a job that started in time: %+v, %v", inTime, err)
	}
}

func TestQueueDeadlineFailsAJobNotStarted(t *testing.T) {
	deadlineMissed(t, start(t, "", true, func(c *Config) { c.MaxBatch = 1 }))
}

func TestReplicaQueueDeadlineFailsAJobNobodyClaims(t *testing.T) {
	sh := newShared(t, "s3")
	deadlineMissed(t, sh.replica(t, true, func(c *Config) { c.MaxBatch = 1 }))
}
