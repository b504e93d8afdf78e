package store

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/minio/minio-go/v7"
	"modernc.org/sqlite"
)

// ErrUnavailable is a store that did not do what was asked for a reason of its own (it is
// down, restarting, cut off, slow, full): the same call may succeed later. Callers answer
// 503 with Retry-After, and a run keeps its work and tries again rather than failing the job.
var ErrUnavailable = errors.New("store unavailable")

// UnavailableError says which store failed and why in words safe to show a client: no
// address, path or credential. The driver's error stays reachable (Detail, errors.As) for
// the log.
type UnavailableError struct {
	Store string // "database" or "image store"
	Cause string // "connection refused", "timed out", …
	Err   error
}

func (e *UnavailableError) Error() string {
	return "the " + e.Store + " is unavailable (" + e.Cause + "); retry later"
}

// Unwrap makes errors.Is(err, ErrUnavailable) hold and keeps the driver's error for errors.As.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Detail is the driver's own message, for the log only (it may name hosts and ports).
func (e *UnavailableError) Detail() string { return e.Err.Error() }

// ErrRefused is a store that refused what was asked for a reason no wait mends (permission
// denied, a bucket that does not exist, a request it calls invalid): waiting would never end,
// so a run fails the job with the reason instead.
var ErrRefused = errors.New("store refused the request")

// RefusedError says which store refused and why, in words safe to show a client (the job's
// error): no address, path or credential. The driver's error stays reachable for the log.
type RefusedError struct {
	Store string // "image store"
	Cause string // "permission denied", "S3 NoSuchBucket", …
	Err   error
}

func (e *RefusedError) Error() string {
	return "the " + e.Store + " refused the request (" + e.Cause + ")"
}

// Unwrap makes errors.Is(err, ErrRefused) hold and keeps the driver's error for errors.As.
func (e *RefusedError) Unwrap() []error { return []error{ErrRefused, e.Err} }

// Detail is the driver's own message, for the log only (it may name paths and hosts).
func (e *RefusedError) Detail() string { return e.Err.Error() }

// dbErr classifies an error of the database driver (PostgreSQL or SQLite): a failure of the
// database or the way to it is ErrUnavailable; a statement the database refuses as wrong (bad
// data, a broken constraint, a syntax error) or the driver refuses (wrong arguments) is a bug
// and stays as it is.
func dbErr(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) {
		return err
	}
	var pg *pgconn.PgError
	var connect *pgconn.ConnectError
	if errors.As(err, &pg) && !errors.As(err, &connect) {
		switch pg.Code[:2] {
		case "22", "23", "42", "0A", "XX": // data, integrity, syntax or access rule, unsupported, internal
			return err
		}
		return &UnavailableError{Store: "database", Cause: "server error SQLSTATE " + pg.Code, Err: err}
	}
	c := cause(err)
	switch {
	case c != "error":
	case pgconn.SafeToRetry(err), pgconn.Timeout(err), strings.Contains(err.Error(), "closed"): // a cut connection, a closed pool or database
		c = "connection closed"
	default:
		return err
	}
	return &UnavailableError{Store: "database", Cause: c, Err: err}
}

// blobErr classifies an error of the object store or the image folder: what the store refuses
// for good (refusedBlob) is ErrRefused, anything else (a connection refused or cut, a timeout,
// a server error, a full disk) ErrUnavailable.
func blobErr(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused) {
		return err
	}
	c := cause(err)
	if code := minio.ToErrorResponse(err).Code; code != "" {
		c = "S3 " + code
	}
	if refused, why := refusedBlob(err); refused {
		if c == "error" {
			c = why
		}
		return &RefusedError{Store: "image store", Cause: c, Err: err}
	}
	return &UnavailableError{Store: "image store", Cause: c, Err: err}
}

// refusedBlob reports whether the image store refused for good, and names why: an S3 answer
// of 4xx other than a timeout or a slow-down (access denied, no such bucket, bad credentials,
// an invalid request), or a file system that forbids the write or cannot hold the path.
func refusedBlob(err error) (bool, string) {
	if r := minio.ToErrorResponse(err); r.StatusCode >= 400 && r.StatusCode < 500 {
		switch {
		case r.StatusCode == http.StatusRequestTimeout, r.StatusCode == http.StatusTooManyRequests,
			r.Code == "RequestTimeout", r.Code == "SlowDown":
			return false, ""
		}
		return true, "HTTP " + strconv.Itoa(r.StatusCode)
	}
	for _, e := range []struct {
		err  error
		name string
	}{
		{os.ErrPermission, "permission denied"}, {syscall.EROFS, "read-only file system"}, {syscall.ENOTDIR, "not a directory"},
		{syscall.EISDIR, "is a directory"}, {syscall.ENAMETOOLONG, "name too long"}, {syscall.EINVAL, "invalid argument"},
		{os.ErrNotExist, "not found"},
	} {
		if errors.Is(err, e.err) {
			return true, e.name
		}
	}
	return false, ""
}

// cause names a transport failure in a few words.
func cause(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		return "connection lost"
	case errors.Is(err, syscall.ENOSPC):
		return "disk full"
	case errors.Is(err, os.ErrPermission):
		return "permission denied"
	case errors.As(err, new(*net.DNSError)):
		return "host not found"
	case errors.As(err, new(*pgconn.ConnectError)):
		return "cannot connect"
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		if name, ok := sqlite.ErrorCodeString[lite.Code()]; ok {
			return name
		}
	}
	return "error"
}
