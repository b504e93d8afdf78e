package main

import (
	"strings"
	"testing"
	"time"

	"marspec/loadtest"
)

func TestLoopbackOnly(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:80", "http://127.3.4.5"} {
		if err := loadtest.LoopbackOnly(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://10.0.0.1:8080", "http://example.com", "http://0.0.0.0:8080", "::"} {
		if err := loadtest.LoopbackOnly(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	f := loadFlags{server: "http://127.0.0.1:1,http://10.0.0.1:2"}
	if got := f.servers(); len(got) != 2 || loadtest.LoopbackOnly(got[1]) == nil {
		t.Errorf("servers %q: the second, remote one must be refused", got)
	}
}

func ptr[T any](v T) *T { return &v }

// Without settings, the load test sends the service's default request (the default preset of
// its target pack), not settings of its own; the preset and mode resolve against that pack.
func TestLoadtestDefaultsToTheServicesDefaultRequest(t *testing.T) {
	base := loadFlags{target: "target", clients: 1, reqs: 1, duration: time.Minute, crossBatch: "both", rounds: 1}
	f := base
	if err := f.check("2-4"); err != nil {
		t.Fatal(err)
	}
	if got := f.describeRequest(); got != "the service's default request: preset fast (mode target)" {
		t.Errorf("default request described as %q", got)
	}
	f = base
	f.mode = "spec"
	if err := f.check("2-4"); err != nil || f.describeRequest() != "mode spec" {
		t.Errorf("--mode spec described as %q (%v)", f.describeRequest(), err)
	}
	f = base
	f.preset, f.mode = "fast", "spec"
	if err := f.check("2-4"); err == nil || !strings.Contains(err.Error(), "mode spec: conflicts with preset fast") {
		t.Errorf("a preset with another mode: %v", err)
	}
	f = base
	f.preset = "paper"
	if err := f.check("2-4"); err == nil || !strings.Contains(err.Error(), "not a preset of pack target") {
		t.Errorf("a preset the target pack lacks: %v", err)
	}
}
