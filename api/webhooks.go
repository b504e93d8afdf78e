package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Webhooks: the server POSTs a WebhookPayload to a job's webhook URL on its events, signed
// with HMAC-SHA256 under the deployment's secret (docs/api.md, "Webhooks"). Receivers check
// the signature with VerifyWebhook (or the standard-library recipe in docs/api.md).

// Webhook events, in the order a job meets them.
const (
	EventStarted   = "started"
	EventSucceeded = "succeeded"
	EventFailed    = "failed"
	EventCancelled = "cancelled"
)

// WebhookEvents are the events a webhook may ask for (webhook_events).
var WebhookEvents = []string{EventStarted, EventSucceeded, EventFailed, EventCancelled}

// QueueDeadlineExceeded is the error_code of a job that did not start before its deadline.
const QueueDeadlineExceeded = "queue_deadline_exceeded"

// Headers of a webhook call.
const (
	// HeaderWebhookID is the delivery's id (job id ":" event): the same on every retry, so a
	// receiver that has seen it can answer 2xx and do nothing. A job run again after the store
	// check's repair tells of its next end of the same kind as job id ":" event ":" N.
	HeaderWebhookID = "Marspec-Webhook-Id"
	// HeaderWebhookTimestamp is when this attempt was signed, in Unix seconds.
	HeaderWebhookTimestamp = "Marspec-Webhook-Timestamp"
	// HeaderWebhookSignature is "v1=" and the hex HMAC-SHA256 of timestamp "." body.
	HeaderWebhookSignature = "Marspec-Webhook-Signature"
)

// WebhookPayload is the body of a webhook call: the event and the job as it left it.
type WebhookPayload struct {
	ID         string     `json:"id"` // the delivery's id, as in HeaderWebhookID
	Event      string     `json:"event"`
	Created    time.Time  `json:"created"` // when the event happened
	Generation Generation `json:"generation"`
}

// Webhook is a job's callback as its JSON shows it.
type Webhook struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// Deliveries are the calls of the job's events so far (GET /v1/generations/{id} only).
	Deliveries []WebhookDelivery `json:"deliveries,omitempty"`
}

// WebhookDelivery is the state of one event's call.
type WebhookDelivery struct {
	Event    string `json:"event"`
	State    string `json:"state"` // pending, delivered, failed (gave up)
	Attempts int    `json:"attempts"`
	// LastStatus is the HTTP status of the last answer (0: none came).
	LastStatus int `json:"last_status,omitempty"`
	// LastError says why the last try failed ("the receiver answered 502 Bad Gateway", "POST
	// https://host/path: timeout after 10s"); it never shows the URL's query, the address the host
	// resolved to, nor the resolver's.
	LastError   string     `json:"last_error,omitempty"`
	NextAttempt *time.Time `json:"next_attempt,omitempty"` // pending after a failed attempt
	Delivered   *time.Time `json:"delivered,omitempty"`
}

// SignWebhook is the HeaderWebhookSignature value of body sent at timestamp (Unix seconds).
func SignWebhook(secret []byte, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Errors of VerifyWebhook.
var (
	ErrWebhookSignature = errors.New("webhook signature does not match")
	ErrWebhookStale     = errors.New("webhook timestamp outside the replay window")
)

// VerifyWebhook checks a webhook call's signature and that it was signed within tolerance of
// now (a replay window; docs/api.md recommends 5 minutes). It compares in constant time.
func VerifyWebhook(secret []byte, h http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	ts, err := strconv.ParseInt(h.Get(HeaderWebhookTimestamp), 10, 64)
	if err != nil {
		return ErrWebhookStale
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrWebhookStale
	}
	want := SignWebhook(secret, ts, body)
	for _, got := range strings.Split(h.Get(HeaderWebhookSignature), " ") { // several while a secret is rotated
		if hmac.Equal([]byte(got), []byte(want)) {
			return nil
		}
	}
	return ErrWebhookSignature
}
