package server

import (
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"marspec/api"
	"marspec/generation"
	"marspec/store"
)

// A request's webhook: checked when the job is posted, so a URL that can never be called is
// a 400, not a delivery that fails for hours. Only http and https; only the hosts
// --webhook-hosts names or, without that list, any host: a literal private address or
// "localhost" is refused here (unless listed), and a name is resolved when it is called and
// every address it connects to is checked then (checkDialled): it must be public, or an IP
// the list names literally, whether the name is listed or not. That also defeats a name that
// resolves differently later (DNS rebinding).

const maxWebhookURL = 2048

// checkWebhook refuses a webhook the server cannot or may not call.
func (s *Server) checkWebhook(req *api.GenerateRequest) error {
	if req.Webhook == "" {
		if req.WebhookEvents != nil {
			return &generation.FieldError{Field: "webhook_events", Reason: "given without a webhook", Allowed: "a webhook URL with it, or neither"}
		}
		return nil
	}
	if s.hooks == nil {
		return &generation.FieldError{Field: "webhook", Reason: "this server sends no webhooks",
			Allowed: "leave it out; the operator enables them with --webhook-secret"}
	}
	if err := s.hooks.checkURL(req.Webhook); err != nil {
		return err
	}
	if req.WebhookEvents != nil && len(req.WebhookEvents) == 0 {
		return &generation.FieldError{Field: "webhook_events", Reason: "empty", Allowed: strings.Join(api.WebhookEvents, ", ") + "; leave it out for all"}
	}
	for _, e := range req.WebhookEvents {
		if !slices.Contains(api.WebhookEvents, e) {
			return &generation.FieldError{Field: "webhook_events", Value: e, Reason: "unknown event", Allowed: strings.Join(api.WebhookEvents, ", ")}
		}
	}
	return nil
}

// checkURL refuses a URL that is not http(s), carries credentials, or names a host the
// deployment does not let webhooks reach.
func (d *deliverer) checkURL(raw string) error {
	bad := func(reason, allowed string) error {
		return &generation.FieldError{Field: "webhook", Value: raw, Reason: reason, Allowed: allowed}
	}
	if len(raw) > maxWebhookURL {
		return &generation.FieldError{Field: "webhook", Reason: "longer than 2048 bytes"}
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return bad("not an absolute URL", "http://HOST[:PORT]/PATH or https://…")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("scheme "+u.Scheme+" not allowed", "http, https")
	case u.User != nil:
		return bad("credentials in the URL are not allowed", "a URL without user:password@; the signature authenticates the call")
	case u.Fragment != "":
		return bad("a fragment is never sent", "a URL without #…")
	}
	return d.hostAllowed(u)
}

// errHostNotAllowed is a webhook host outside what the deployment allows.
var errHostNotAllowed = errors.New("host not allowed")

// hostAllowed checks u's host against --webhook-hosts or, without it, refuses the hosts that
// are private by their form (the rest are checked when they are dialled).
func (d *deliverer) hostAllowed(u *url.URL) error {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	refuse := func(reason, allowed string) error {
		return &generation.FieldError{Field: "webhook", Value: u.Redacted(), Reason: "host " + host + " " + reason, Allowed: allowed}
	}
	if len(d.hosts) > 0 {
		for _, r := range d.hosts {
			if r.allows(host, port) {
				return nil
			}
		}
		written := make([]string, len(d.hosts))
		for i, r := range d.hosts {
			written[i] = r.asWritten
		}
		return refuse("is not allowed", "the hosts of --webhook-hosts: "+strings.Join(written, ", "))
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return refuse("is this machine", "a public host (the operator may allow others with --webhook-hosts)")
	}
	if ip, err := netip.ParseAddr(host); err == nil && !publicAddr(ip) {
		return refuse("is a private, loopback or link-local address", "a public host (the operator may allow others with --webhook-hosts)")
	}
	return nil
}

// publicAddr reports whether a webhook may connect to ip without listing it: not loopback,
// private, link-local, multicast, unspecified, shared (100.64/10), this network (0/8), nor
// another range that is not globally reachable; and for an IPv6 address that embeds an IPv4
// one (IPv4-mapped and -compatible, NAT64, 6to4, Teredo), the embedded address too, since a
// translator or tunnel on the way delivers the call to it (64:ff9b::a9fe:a9fe is
// 169.254.169.254).
func publicAddr(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	switch {
	case ip.IsLoopback(), ip.IsPrivate(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast(),
		ip.IsMulticast(), ip.IsUnspecified():
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	for _, e := range embedsIPv4 {
		if e.prefix.Contains(ip) {
			for _, v4 := range e.embedded(ip.As16()) {
				if !publicAddr(v4) {
					return false
				}
			}
		}
	}
	return true
}

// nonPublic are the ranges refused whole beyond the standard library's classes.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated, still routed inside some networks)
	netip.MustParsePrefix("64:ff9b:1::/48"), // NAT64 for local use: where it embeds its IPv4 address is the network's choice
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
}

// embedsIPv4 are the IPv6 ranges whose addresses carry an IPv4 address, and where.
var embedsIPv4 = []struct {
	prefix   netip.Prefix
	embedded func(a [16]byte) []netip.Addr
}{
	{netip.MustParsePrefix("::/96"), last32},        // IPv4-compatible (deprecated)
	{netip.MustParsePrefix("64:ff9b::/96"), last32}, // NAT64, the well-known prefix
	{netip.MustParsePrefix("2002::/16"), func(a [16]byte) []netip.Addr { // 6to4: the tunnel's IPv4 end
		return []netip.Addr{netip.AddrFrom4([4]byte(a[2:6]))}
	}},
	{netip.MustParsePrefix("2001::/32"), func(a [16]byte) []netip.Addr { // Teredo: its server, and its client (bits inverted)
		return []netip.Addr{netip.AddrFrom4([4]byte(a[4:8])), netip.AddrFrom4([4]byte{^a[12], ^a[13], ^a[14], ^a[15]})}
	}},
}

func last32(a [16]byte) []netip.Addr { return []netip.Addr{netip.AddrFrom4([4]byte(a[12:16]))} }

// wireWebhook is a job's webhook as its JSON shows it; with deliveries (one job's GET) their
// state too.
func wireWebhook(req api.GenerateRequest, deliveries []store.Delivery) *api.Webhook {
	if req.Webhook == "" {
		return nil
	}
	w := &api.Webhook{URL: withoutQuery(req.Webhook), Events: req.WebhookEvents}
	if w.Events == nil {
		w.Events = api.WebhookEvents
	}
	for _, d := range deliveries {
		wd := api.WebhookDelivery{Event: d.Event, State: d.State, Attempts: d.Attempts, LastStatus: d.LastStatus,
			LastError: d.LastError, Delivered: d.Delivered}
		if d.State == store.DeliveryPending && d.Next.UnixNano() > 0 { // after a failed try
			next := d.Next
			wd.NextAttempt = &next
		}
		w.Deliveries = append(w.Deliveries, wd)
	}
	return w
}

// withoutQuery is a webhook URL as a job shows it: a query may carry the receiver's own token,
// and a job is readable without the API token, so its values are left out.
func withoutQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery == "" {
		return raw
	}
	u.RawQuery = "…"
	return u.String()
}
