package server

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// The settings of priorities, queue deadlines and webhooks, checked as the others are.

// checkHosted rejects these settings when they cannot work, naming the flag.
func (c *Config) checkHosted() error {
	switch {
	case c.PriorityAging < time.Millisecond || c.PriorityAging > time.Hour:
		return fmt.Errorf("--priority-aging %s out of range (allowed: 1ms to 1h)", c.PriorityAging)
	case c.MaxQueueTimeout < time.Second || c.MaxQueueTimeout > 7*24*time.Hour:
		return fmt.Errorf("--max-queue-timeout %s out of range (allowed: 1s to 168h)", c.MaxQueueTimeout)
	case c.QueueTimeout < 0 || c.QueueTimeout > c.MaxQueueTimeout:
		return fmt.Errorf("--queue-timeout %s out of range (allowed: 0, none, to --max-queue-timeout %s)", c.QueueTimeout, c.MaxQueueTimeout)
	case c.WebhookAttempts < 1 || c.WebhookAttempts > 30:
		return fmt.Errorf("--webhook-attempts %d out of range (allowed: 1 to 30)", c.WebhookAttempts)
	case c.WebhookTimeout < 100*time.Millisecond || c.WebhookTimeout > 2*time.Minute:
		return fmt.Errorf("--webhook-timeout %s out of range (allowed: 100ms to 2m)", c.WebhookTimeout)
	}
	for _, s := range strings.Split(c.WebhookSecret, ",") {
		if c.WebhookSecret != "" && len(s) < 16 {
			return fmt.Errorf("--webhook-secret: each secret must have at least 16 characters (a random 32-byte hex string is a good one)")
		}
	}
	_, err := parseHostList(c.WebhookHosts)
	return err
}

// hostRule is one entry of --webhook-hosts: a host, or every subdomain of a domain
// ("*.example.com", which does not match example.com itself), with a port or any.
type hostRule struct {
	host      string // lower case; for a wildcard, ".example.com"
	wildcard  bool
	port      string // "" for any
	asWritten string
}

// parseHostList reads --webhook-hosts.
func parseHostList(list string) ([]hostRule, error) {
	var rules []hostRule
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		notHost := fmt.Errorf("--webhook-hosts %q is not a host (allowed: HOST, *.DOMAIN, either with :PORT; e.g. hooks.example.com,127.0.0.1:9000)", item)
		if strings.ContainsAny(item, "/@?# ") {
			return nil, notHost
		}
		r := hostRule{host: strings.ToLower(item), asWritten: item}
		if h, p, err := net.SplitHostPort(r.host); err == nil {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("--webhook-hosts %q: port %q out of range (allowed: 1 to 65535)", item, p)
			}
			r.host, r.port = h, p
		}
		r.host = strings.Trim(r.host, "[]")
		if strings.HasPrefix(r.host, "*.") {
			r.host, r.wildcard = r.host[1:], true
		}
		if r.host == "" || r.host == "." || strings.ContainsAny(r.host, "*:") && net.ParseIP(r.host) == nil {
			return nil, notHost
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// allows reports whether a rule lets a webhook call host (lower case, no brackets) on port.
func (r hostRule) allows(host, port string) bool {
	if r.port != "" && r.port != port {
		return false
	}
	if r.wildcard {
		return strings.HasSuffix(host, r.host)
	}
	return host == r.host
}
