package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"marspec/api"
)

// The load driver against a server on the analytic models: every request done once, images
// counted, batch sizes read from /metrics.
func TestLoadDriverCountsEveryJobOnce(t *testing.T) {
	url := remoteTestServer(t, "")
	c, err := api.NewClient(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	f := loadFlags{clients: 3, reqs: 7, duration: time.Minute, minImg: 1, maxImg: 3, numIter: ptr(3), mode: "target", seed: 5}
	res, err := f.drive(replicas{c}, loadResult{Batching: "on"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 7 || res.Images < 7 || res.Images > 21 || res.EngineSteps == 0 || res.MeanBatch < 1 || res.StoppedEarly {
		t.Fatalf("%+v", res)
	}
	if !(res.P50 <= res.P95 && res.P95 <= res.P99) {
		t.Errorf("percentiles out of order: %+v", res)
	}
	list, err := c.List(t.Context(), api.ListOptions{Limit: 100})
	if err != nil || list.Total != 7+3 { // the mix and the warm-up burst of one request per client
		t.Fatalf("jobs on the server: %d, %v", list.Total, err)
	}
}

// With several --server addresses, requests go round-robin and the service's counters are
// the sum of the servers' own: two servers each finish their share, none is counted twice.
func TestLoadDriverSpreadsOverServers(t *testing.T) {
	var cs replicas
	for range 2 {
		c, err := api.NewClient(remoteTestServer(t, ""), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	f := loadFlags{clients: 2, reqs: 6, duration: time.Minute, minImg: 1, maxImg: 2, numIter: ptr(3), mode: "target", seed: 9}
	res, err := f.drive(cs, loadResult{Batching: "on"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 6 {
		t.Fatalf("%+v", res)
	}
	for i, c := range cs {
		list, err := c.List(t.Context(), api.ListOptions{Limit: 100})
		// each server: its half of the mix and one warm-up request
		if err != nil || list.Total != 3+1 {
			t.Fatalf("server %d holds %d jobs (%v), want its round-robin share 3 + 1 warm-up", i, list.Total, err)
		}
	}
	f.server = "http://127.0.0.1:1,http://10.0.0.1:2"
	if err := loopbackOnly(f.servers()[1]); err == nil {
		t.Fatal("a second, remote server passed")
	}
}

func TestLoopbackOnlyAndPercentile(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:80", "http://127.3.4.5"} {
		if err := loopbackOnly(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://10.0.0.1:8080", "http://example.com", "http://0.0.0.0:8080", "::"} {
		if err := loopbackOnly(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if percentile(v, 0.5) != 5 || percentile(v, 0.95) != 10 || percentile(v, 0.99) != 10 || !math.IsNaN(percentile(nil, 0.5)) {
		t.Error("nearest-rank percentiles")
	}
}

func ptr[T any](v T) *T { return &v }

// Without settings, the load test sends the service's default request (its default preset),
// not settings of its own.
func TestLoadtestDefaultsToTheServicesDefaultRequest(t *testing.T) {
	var f loadFlags
	if got := f.describeRequest(); got != "the service's default request: preset fast (mode target)" {
		t.Errorf("default request described as %q", got)
	}
	f.mode = "spec"
	if got := f.describeRequest(); got != "mode spec" {
		t.Errorf("--mode spec described as %q", got)
	}
	f = loadFlags{preset: "fast", mode: "spec", clients: 1, reqs: 1, duration: time.Minute, crossBatch: "both", rounds: 1}
	if err := f.check("2-4"); err == nil || !strings.Contains(err.Error(), "mode spec: conflicts with preset fast") {
		t.Errorf("a preset with another mode: %v", err)
	}
}
