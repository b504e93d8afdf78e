package main

import (
	"strings"
	"testing"
	"time"
)

func TestLoopbackOnly(t *testing.T) {
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
	f := loadFlags{server: "http://127.0.0.1:1,http://10.0.0.1:2"}
	if got := f.servers(); len(got) != 2 || loopbackOnly(got[1]) == nil {
		t.Errorf("servers %q: the second, remote one must be refused", got)
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
