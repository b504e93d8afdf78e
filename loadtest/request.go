package loadtest

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"marspec/api"
	"marspec/generation"
)

// Request is what every request of the mix carries (only what the flags set, so the rest is
// the service's default).
func (m Mix) Request() generation.Request {
	return generation.Request{GenerateRequest: api.GenerateRequest{Mode: m.Mode, Preset: m.Preset, NumIter: m.NumIter, Precision: m.Precision}}
}

// Describe says what the mix's requests run, for a report's header, given the mode and preset
// they resolve to on the service (generation.ResolveMode over its target pack's settings).
func (m Mix) Describe(mode, preset string) string {
	s := "mode " + mode
	if preset != "" {
		s = "preset " + preset + " (" + s + ")"
		if m.Preset == "" {
			s = "the service's default request: " + s
		}
	}
	if m.NumIter != nil {
		s += fmt.Sprintf(", num_iter %d", *m.NumIter)
	}
	if m.Precision != "" {
		s += ", precision " + m.Precision
	}
	return s
}

// ParseImages reads --images: N or LO-HI images per request, 1 <= LO <= HI <= 256.
func ParseImages(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || lo < 1 || hi < lo || hi > 256 {
		return 0, 0, fmt.Errorf("--images %q: want N or LO-HI with 1 <= LO <= HI <= 256", s)
	}
	return lo, hi, nil
}

// LoopbackOnly refuses a server that is not this machine: a load test is not for others'.
func LoopbackOnly(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("--server %q: want http://127.0.0.1:PORT", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--server %q: loopback addresses only (127.0.0.1, ::1, localhost)", raw)
}
