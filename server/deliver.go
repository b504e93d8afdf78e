package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"marspec/api"
	"marspec/generation"
	"marspec/store"
)

// deliverer calls webhooks: it claims due deliveries from the store's outbox under a lease
// (any replica, as jobs are claimed), fixes each one's body at its first attempt, signs and
// POSTs it, and records the answer; a failed try is retried with exponential backoff and
// jitter until --webhook-attempts. A deliverer that dies mid-call records nothing: its lease
// runs out (twice --webhook-timeout) and the delivery is claimed again, here or elsewhere, so
// every event is delivered at least once (receivers deduplicate by Marspec-Webhook-Id).
type deliverer struct {
	s        *Server
	outbox   store.Outbox
	owner    string
	secrets  [][]byte // the first signs; all sign while a secret is rotated
	hosts    []hostRule
	client   *http.Client
	wake     chan struct{}
	slots    chan struct{} // deliveries in flight
	outcomes *prometheus.CounterVec
}

// Delivery timing (variables: tests shorten them).
var (
	webhookPollEvery  = time.Second      // due deliveries are looked for (also on every event here)
	webhookFirstRetry = time.Second      // the wait after a first failed try, doubled after each
	webhookMaxRetry   = 10 * time.Minute // the longest wait between tries
	webhookInFlight   = 64               // calls at once per server
	webhookPerKey     = 8                // of them for one key's jobs (see claimAndSend)
	webhookBodyLimit  = int64(64 << 10)  // of an answer read (and dropped)
	webhookUserAgent  = "marspec-webhook/1 (+docs/api.md)"
)

// newDeliverer is nil when webhooks are off: no --webhook-secret (requests with a webhook get
// a 400 saying so) or a store without an outbox.
func newDeliverer(s *Server) *deliverer {
	if s.cfg.WebhookSecret == "" {
		return nil
	}
	outbox, ok := s.store.Meta.(store.Outbox)
	if !ok {
		s.log.Warn("webhooks are off: this store keeps no webhook outbox")
		return nil
	}
	hosts, _ := parseHostList(s.cfg.WebhookHosts) // checked by Config.Check
	d := &deliverer{s: s, outbox: outbox, hosts: hosts, wake: make(chan struct{}, 1), slots: make(chan struct{}, webhookInFlight),
		owner: fmt.Sprintf("local-%d", os.Getpid())}
	if s.rep != nil {
		d.owner = s.rep.id
	}
	for _, k := range strings.Split(s.cfg.WebhookSecret, ",") {
		d.secrets = append(d.secrets, []byte(k))
	}
	dialer := &net.Dialer{Timeout: s.cfg.WebhookTimeout, Control: d.checkDialled}
	d.client = &http.Client{Timeout: s.cfg.WebhookTimeout,
		Transport: &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: s.cfg.WebhookTimeout,
			MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}, // no Proxy: the address check must see the receiver
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	d.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "marspec_webhook_deliveries_total",
		Help: "Webhook tries by outcome: delivered (2xx), retried (another try is due), gave_up."}, []string{"outcome"})
	s.metrics.reg.MustRegister(d.outcomes, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "marspec_webhook_pending",
		Help: "Webhook deliveries not yet made nor given up (every replica's)."}, func() float64 {
		n, err := outbox.PendingDeliveries()
		if err != nil {
			return math.NaN()
		}
		return float64(n)
	}))
	return d
}

// checkDialled refuses a connection to an address that is not public unless --webhook-hosts
// lists that very IP: the address actually dialled, after resolution, so no name leads a call
// inside, an allowed one included (a listed name that resolves to loopback is still refused).
func (d *deliverer) checkDialled(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return errDialPrivate
	}
	if publicAddr(ap.Addr()) || d.listsIP(ap) {
		return nil
	}
	return errDialPrivate
}

// listsIP reports whether --webhook-hosts names ap's IP literally (with its port, or any).
func (d *deliverer) listsIP(ap netip.AddrPort) bool {
	ip := ap.Addr().WithZone("").Unmap()
	for _, r := range d.hosts {
		listed, err := netip.ParseAddr(r.host)
		if err == nil && !r.wildcard && listed.Unmap() == ip && (r.port == "" || r.port == strconv.Itoa(int(ap.Port()))) {
			return true
		}
	}
	return false
}

// poke makes the deliverer look for due deliveries now (an event was recorded here).
func (d *deliverer) poke() {
	if d == nil {
		return
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// claimAndSend claims as many due deliveries as there are free slots and sends each in a
// goroutine of its own. Of one key's jobs it holds at most webhookPerKey calls at once (the
// store counts them), so a tenant whose receiver hangs holds that many slots, not all: the
// bound is per key rather than per host because a key is what the operator issues, while
// hosts are the caller's to choose (any number of names under one domain), so a bound per
// host is one a tenant could multiply at will. Jobs without a named key share one bound.
func (d *deliverer) claimAndSend(ctx context.Context) {
	free := cap(d.slots) - len(d.slots)
	if free == 0 {
		return
	}
	due, err := d.outbox.ClaimDeliveries(d.owner, 2*d.s.cfg.WebhookTimeout, time.Now(), free, webhookPerKey)
	if err != nil {
		d.s.log.Warn("webhooks: claiming deliveries", "err", detail(err))
		return
	}
	for _, del := range due {
		d.slots <- struct{}{}
		d.s.bg.run(func(ctx context.Context) {
			defer func() { <-d.slots; d.poke() }()
			d.deliver(ctx, del)
		})
	}
}

// deliver makes one try of a claimed delivery and records its outcome.
func (d *deliverer) deliver(ctx context.Context, del store.Delivery) {
	hold := del.Hold(d.owner)
	body := del.Body
	if body == nil {
		fresh, err := d.s.webhookBody(del)
		if err == nil {
			body, err = d.outbox.FreezeBody(hold, fresh)
		}
		if err != nil { // the job was deleted (its deliveries went with it), or the store is away: the lease runs out
			d.s.log.Warn("webhooks: preparing a delivery", "id", del.ID, "err", detail(err))
			return
		}
	}
	status, err := d.post(ctx, del, body)
	if ctx.Err() != nil {
		return // stopping: the lease runs out and the next claim tries again
	}
	now := time.Now()
	var recorded bool
	var rerr error
	switch {
	case err == nil && status >= 200 && status < 300:
		recorded, rerr = d.outbox.Delivered(hold, status, now)
		d.outcomes.WithLabelValues("delivered").Inc()
	default:
		reason, giveUp, wait := d.judge(del, status, err)
		next := now.Add(wait)
		if giveUp {
			next = now
			d.s.log.Warn("webhooks: giving up", "id", del.ID, "attempts", del.Attempts, "reason", reason)
			d.outcomes.WithLabelValues("gave_up").Inc()
		} else {
			d.outcomes.WithLabelValues("retried").Inc()
		}
		recorded, rerr = d.outbox.DeliveryFailed(hold, status, reason, next, giveUp)
	}
	if rerr != nil || !recorded {
		d.s.log.Warn("webhooks: outcome not recorded; the delivery will be tried again", "id", del.ID, "err", rerr)
	}
}

// judge says why a try failed, whether to give up, and how long to wait before the next.
func (d *deliverer) judge(del store.Delivery, status int, err error) (reason string, giveUp bool, wait time.Duration) {
	wait = retryWait(del.Attempts)
	switch {
	case errors.Is(err, errHostNotAllowed):
		return callFailure(del.URL, err, d.s.cfg.WebhookTimeout), true, 0
	case err != nil:
		reason = callFailure(del.URL, err, d.s.cfg.WebhookTimeout)
	case status == http.StatusGone:
		return "the receiver answered 410 Gone: no more tries", true, 0
	default:
		reason = fmt.Sprintf("the receiver answered %d %s", status, http.StatusText(status))
	}
	return reason, del.Attempts >= d.s.cfg.WebhookAttempts, wait
}

// retryWait is the wait after try n failed: webhookFirstRetry doubled n-1 times, at most
// webhookMaxRetry, with "equal jitter" (between half of it and all of it) so receivers that
// failed together are not called again together.
func retryWait(n int) time.Duration {
	w := webhookMaxRetry
	if n-1 < 30 && webhookFirstRetry<<(n-1) < webhookMaxRetry {
		w = webhookFirstRetry << (n - 1)
	}
	return w/2 + rand.N(w/2+1)
}

// post signs body and sends it; it returns the answer's status (0 when none came).
func (d *deliverer) post(ctx context.Context, del store.Delivery, body []byte) (int, error) {
	u, err := url.Parse(del.URL)
	if err != nil {
		return 0, &hostRefused{reason: "not a URL"}
	}
	if err := d.hostAllowed(u); err != nil { // the allow-list may have changed since the job was posted
		var fe *generation.FieldError
		if errors.As(err, &fe) {
			return 0, &hostRefused{reason: fe.Reason}
		}
		return 0, &hostRefused{reason: "host not allowed"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, del.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts := time.Now().Unix()
	sigs := make([]string, len(d.secrets))
	for i, k := range d.secrets {
		sigs[i] = api.SignWebhook(k, ts, body)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", webhookUserAgent)
	req.Header.Set(api.HeaderWebhookID, del.ID)
	req.Header.Set(api.HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(api.HeaderWebhookSignature, strings.Join(sigs, " "))
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhookBodyLimit))
	return resp.StatusCode, nil
}

// webhookBody is a delivery's payload: the event and the job as the event left it (its
// status, error and times from the delivery; its settings and the images stored by now).
func (s *Server) webhookBody(d store.Delivery) ([]byte, error) {
	j, err := s.store.Job(d.JobID)
	if err != nil {
		return nil, err
	}
	imgs, err := s.store.Images(d.JobID)
	if err != nil {
		return nil, err
	}
	g := s.wire(j, imgs)
	g.Status, g.Error, g.Started, g.Finished, g.Seconds = d.Status, d.Error, d.Started, d.Finished, 0
	if d.Started != nil && d.Finished != nil {
		g.Seconds = d.Finished.Sub(*d.Started).Seconds()
	}
	g.ErrorCode = errorCode(d.Status, d.Error)
	return json.Marshal(api.WebhookPayload{ID: d.ID, Event: d.Event, Created: d.Created, Generation: g})
}
