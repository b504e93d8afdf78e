package api

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// A signature verifies with its secret within the replay window, with either secret while
// one is rotated, and not with another secret, another body or an old timestamp.
func TestVerifyWebhook(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"j:succeeded","event":"succeeded"}`)
	newKey, oldKey := []byte("new-secret-0123456789"), []byte("old-secret-0123456789")
	header := func(ts int64, sigs string) http.Header {
		h := http.Header{}
		h.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
		h.Set(HeaderWebhookSignature, sigs)
		return h
	}
	ts := now.Unix()
	rotated := header(ts, SignWebhook(newKey, ts, body)+" "+SignWebhook(oldKey, ts, body))
	for _, c := range []struct {
		name   string
		secret []byte
		h      http.Header
		body   []byte
		want   error
	}{
		{"new secret", newKey, rotated, body, nil},
		{"old secret while rotating", oldKey, rotated, body, nil},
		{"another secret", []byte("another-secret-0123"), rotated, body, ErrWebhookSignature},
		{"another body", newKey, rotated, []byte(`{"id":"j:failed"}`), ErrWebhookSignature},
		{"signed 6 minutes ago", newKey, header(ts-360, SignWebhook(newKey, ts-360, body)), body, ErrWebhookStale},
		{"no timestamp", newKey, http.Header{}, body, ErrWebhookStale},
	} {
		if err := VerifyWebhook(c.secret, c.h, c.body, 5*time.Minute, now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// computed apart: python3 -c 'import hmac,hashlib; print(hmac.new(b"k", b"1.b", hashlib.sha256).hexdigest())'
	if got, want := SignWebhook([]byte("k"), 1, []byte("b")), "v1=2946e37a45bb02a0bf1bf1a7d9219543801fedd301f9f485aebd72c928639bea"; got != want {
		t.Errorf("signature of timestamp 1, body b, secret k: %s, want %s", got, want)
	}
}
