package server

import (
	"strings"
	"testing"
	"time"
)

// Settings of priorities, deadlines and webhooks that cannot work are refused naming the flag.
func TestConfigCheckHosted(t *testing.T) {
	for want, edit := range map[string]func(*Config){
		"--priority-aging":    func(c *Config) { c.PriorityAging = 0 },
		"--max-queue-timeout": func(c *Config) { c.MaxQueueTimeout = time.Millisecond },
		"--queue-timeout":     func(c *Config) { c.QueueTimeout = 48 * time.Hour },
		"--webhook-attempts":  func(c *Config) { c.WebhookAttempts = 0 },
		"--webhook-timeout":   func(c *Config) { c.WebhookTimeout = time.Hour },
		"--webhook-secret":    func(c *Config) { c.WebhookSecret = "long-enough-secret-1,short" },
		"--webhook-hosts \"https://x.example.com\" is not a host": func(c *Config) { c.WebhookHosts = "ok.example.com,https://x.example.com" },
		"--webhook-hosts \"x.example.com:99999\": port":           func(c *Config) { c.WebhookHosts = "x.example.com:99999" },
	} {
		c := DefaultConfig()
		edit(&c)
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	c := DefaultConfig()
	c.WebhookSecret, c.WebhookHosts = "long-enough-secret-1,long-enough-secret-0", "hooks.example.com, *.example.org:8443, 127.0.0.1, [::1]:9000"
	if err := c.Check(); err != nil {
		t.Errorf("good settings refused: %v", err)
	}
	rules, _ := parseHostList(c.WebhookHosts)
	for _, h := range []struct {
		host, port string
		ok         bool
	}{{"hooks.example.com", "443", true}, {"a.example.org", "8443", true}, {"example.org", "8443", false}, {"a.example.org", "443", false},
		{"127.0.0.1", "80", true}, {"::1", "9000", true}, {"::1", "80", false}, {"evil-hooks.example.com", "443", false}} {
		allowed := false
		for _, r := range rules {
			allowed = allowed || r.allows(h.host, h.port)
		}
		if allowed != h.ok {
			t.Errorf("%s:%s allowed %v, want %v", h.host, h.port, allowed, h.ok)
		}
	}
}
