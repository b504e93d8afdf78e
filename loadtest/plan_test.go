package loadtest

import (
	"strings"
	"testing"
	"time"

	"marspec/server"
)

func TestLoopbackOnly(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:80", "http://127.3.4.5"} {
		if err := LoopbackOnly(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://10.0.0.1:8080", "http://example.com", "http://0.0.0.0:8080", "::"} {
		if err := LoopbackOnly(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func planOn(target string) Plan {
	p := Plan{Mix: Mix{Clients: 1, Requests: 1, Duration: time.Minute, MinImages: 2, MaxImages: 4},
		CrossBatch: "both", Rounds: 1, Local: server.DefaultConfig()}
	p.Local.Target = target
	return p
}

// A remote replica among the servers is refused before any of them is contacted.
func TestPlanRefusesARemoteServer(t *testing.T) {
	p := planOn("target")
	p.Servers = []string{"http://127.0.0.1:1", "http://10.0.0.1:2"}
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "10.0.0.1") {
		t.Errorf("servers %q: the second, remote one must be refused, got %v", p.Servers, err)
	}
}

// Without settings, the load test sends the service's default request (the default preset of
// its target pack), not settings of its own; the preset and mode resolve against that pack.
func TestPlanDefaultsToTheServicesDefaultRequest(t *testing.T) {
	p := planOn("target")
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	if got := p.DescribeRequest(); got != "the service's default request: preset fast (mode target)" {
		t.Errorf("default request described as %q", got)
	}
	p = planOn("target")
	p.Mix.Mode = "spec"
	if err := p.Check(); err != nil || p.DescribeRequest() != "mode spec" {
		t.Errorf("--mode spec described as %q (%v)", p.DescribeRequest(), err)
	}
	p = planOn("target")
	p.Mix.Preset, p.Mix.Mode = "fast", "spec"
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "mode spec: conflicts with preset fast") {
		t.Errorf("a preset with another mode: %v", err)
	}
	p = planOn("target")
	p.Mix.Preset = "paper"
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "not a preset of pack target") {
		t.Errorf("a preset the target pack lacks: %v", err)
	}
}

func TestPlanPassesAlternate(t *testing.T) {
	p := planOn("target")
	p.Rounds = 2
	if got := strings.Join(p.Passes(), ","); got != "on,off,off,on" {
		t.Errorf("passes %s, want on,off,off,on", got)
	}
	p.Servers = []string{"http://127.0.0.1:1"}
	if got := p.Passes(); len(got) != 1 {
		t.Errorf("against a server: passes %q, want one", got)
	}
}
