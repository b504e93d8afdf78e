package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"time"
)

// Why a webhook call got no answer, as a delivery's last_error and the log show it. Go's
// errors carry what a job's reader must not see: *url.Error the whole URL (its query may hold
// the receiver's token, which the job's JSON hides), *net.OpError the address dialled (an
// internal one, for a name that resolves inside), *net.DNSError the resolver's address. So a
// failure is described from its kind, never from those errors' text: "POST
// https://host/path: timeout after 10s", "…: connection refused".

// callFailure describes a failed call of rawURL.
func callFailure(rawURL string, err error, timeout time.Duration) string {
	return "POST " + urlWithoutQuery(rawURL) + ": " + whatFailed(err, timeout)
}

// urlWithoutQuery is scheme://host/path of a webhook URL: no query, credentials or fragment.
func urlWithoutQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the webhook URL"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

// whatFailed names a call's failure by its kind.
func whatFailed(err error, timeout time.Duration) string {
	var (
		dns      *net.DNSError
		netErr   net.Error
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		notTLS   tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, errHostNotAllowed):
		var refused *hostRefused
		if errors.As(err, &refused) {
			return refused.reason
		}
		return "host not allowed"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "host not found"
	case errors.As(err, &dns):
		return "the host's name could not be resolved"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("timeout after %s", timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the receiver"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	case errors.As(err, &unknown):
		return "TLS: the receiver's certificate is signed by an unknown authority"
	case errors.As(err, &hostname):
		return "TLS: the receiver's certificate is not valid for its host"
	case errors.As(err, &invalid):
		return "TLS: the receiver's certificate is not valid (expired, not yet valid, or not for a server)"
	case errors.As(err, &notTLS):
		return "TLS handshake failed: the receiver does not speak TLS"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the receiver closed the connection before answering"
	}
	return "no answer (" + innermost(err) + ")"
}

// innermost is the text of the error under any *url.Error and *net.OpError, which add the
// URL and the addresses.
func innermost(err error) string {
	for err != nil {
		var u *url.Error
		var op *net.OpError
		switch {
		case errors.As(err, &u):
			err = u.Err
		case errors.As(err, &op):
			err = op.Err
		default:
			return err.Error()
		}
	}
	return "no error"
}

// hostRefused is a call the deployment does not let webhooks make, described without the
// addresses behind it.
type hostRefused struct{ reason string }

func (e *hostRefused) Error() string { return e.reason }
func (e *hostRefused) Unwrap() error { return errHostNotAllowed }

// errDialPrivate is a connection refused because the address dialled is not public; it names
// no address (a job's reader must not learn what a name resolves to inside).
var errDialPrivate = &hostRefused{reason: "refused: the host resolves to an address that is not public " +
	"(loopback, private, link-local or another internal range; the operator may allow one by listing its IP in --webhook-hosts)"}
