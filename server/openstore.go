package server

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"marspec/store"
)

// OpenStore opens the store cfg names: --store (sqlite:PATH or postgres://…) for jobs and
// image records, --blobs (file:DIR or s3://BUCKET?endpoint=…&region=…) for the PNG bytes;
// either left empty is the embedded one under --data-dir, as without them. An error is one
// line naming the flag and what was tried (without a password).
func OpenStore(cfg Config) (*store.Store, error) {
	if cfg.Store == "" && cfg.Blobs == "" {
		return store.Open(cfg.DataDir)
	}
	if cfg.Store == "" || cfg.Blobs == "" {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("--data-dir %s: %w", cfg.DataDir, err)
		}
	}
	meta, err := openMeta(cfg.Store, cfg.DataDir)
	if err != nil {
		return nil, errors.New(redactIn(fmt.Sprintf("--store %s: %v", cfg.Store, oneLine(err)), cfg.Store))
	}
	blobs, err := openBlobs(cfg.Blobs, cfg.DataDir)
	if err != nil {
		meta.Close()
		return nil, errors.New(redactIn(fmt.Sprintf("--blobs %s: %v", cfg.Blobs, oneLine(err)), cfg.Blobs))
	}
	return store.New(meta, blobs), nil
}

// checkStoreURLs refuses a --store or --blobs of an unknown form before anything is opened.
func checkStoreURLs(c *Config) error {
	switch {
	case c.Store == "", strings.HasPrefix(c.Store, "sqlite:") && len(c.Store) > len("sqlite:"),
		strings.HasPrefix(c.Store, "postgres://"), strings.HasPrefix(c.Store, "postgresql://"):
	default:
		return fmt.Errorf("--store %s: unknown kind of store (allowed: %s)", redact(c.Store), storeForms)
	}
	switch {
	case c.Blobs == "", strings.HasPrefix(c.Blobs, "file:") && len(c.Blobs) > len("file:"), strings.HasPrefix(c.Blobs, "s3://"):
	default:
		return fmt.Errorf("--blobs %s: unknown kind of image store (allowed: %s)", redact(c.Blobs), blobsForms)
	}
	return nil
}

const (
	storeForms = "sqlite:PATH or postgres://USER[:PASSWORD]@HOST:PORT/DATABASE"
	blobsForms = "file:DIR or s3://BUCKET?endpoint=http://HOST:PORT&region=REGION"
)

func openMeta(u, dataDir string) (store.Meta, error) {
	switch {
	case u == "":
		return store.OpenSQLite(filepath.Join(dataDir, "marspec.db"))
	case strings.HasPrefix(u, "sqlite:"):
		path := strings.TrimPrefix(u, "sqlite:")
		if path == "" {
			return nil, errors.New("no path after sqlite: (allowed: " + storeForms + ")")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		return store.OpenSQLite(path)
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return store.OpenPostgres(u)
	}
	return nil, errors.New("unknown kind of store (allowed: " + storeForms + ")")
}

func openBlobs(u, dataDir string) (store.Blobs, error) {
	switch {
	case u == "":
		return store.NewFiles(filepath.Join(dataDir, "images"))
	case strings.HasPrefix(u, "file:"):
		dir := strings.TrimPrefix(u, "file:")
		if dir == "" {
			return nil, errors.New("no folder after file: (allowed: " + blobsForms + ")")
		}
		return store.NewFiles(dir)
	case strings.HasPrefix(u, "s3://"):
		return store.OpenS3(u)
	}
	return nil, errors.New("unknown kind of image store (allowed: " + blobsForms + ")")
}

// redact hides the secrets of a store URL (--store postgres://user:secret@…, --blobs
// s3://KEY:SECRET@…, a password= parameter) without relying on it to parse: a password may
// hold %, #, / or @, and a URL that does not parse is exactly the one an error prints.
func redact(u string) string { return redactIn(u, u) }

// redactIn replaces every secret of the store URL u in text (the URL itself, or a driver's
// message that may quote it), as written and percent-decoded.
func redactIn(text, u string) string {
	for _, s := range secretsIn(u) {
		text = strings.ReplaceAll(text, s, "xxxxx")
	}
	return text
}

// secretParam matches a query parameter whose name says it holds a secret.
var secretParam = regexp.MustCompile(`(?i)[?&][^=&?]*(?:password|secret)[^=&?]*=([^&]*)`)

// secretsIn lists the secrets of u, longest first (one holding another is replaced whole):
// the password of scheme://USER:PASSWORD@… (the text between the first ':' after "://" and
// the last '@', whatever it holds) and the values of password and secret parameters.
func secretsIn(u string) []string {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return nil // sqlite:PATH, file:DIR
	}
	var found []string
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if _, pass, has := strings.Cut(rest[:at], ":"); has && pass != "" {
			found = append(found, pass)
		}
	}
	for _, m := range secretParam.FindAllStringSubmatch(rest, -1) {
		if m[1] != "" {
			found = append(found, m[1])
		}
	}
	for _, s := range found {
		if d, err := url.PathUnescape(s); err == nil && d != s {
			found = append(found, d)
		}
	}
	sort.Slice(found, func(i, j int) bool { return len(found[i]) > len(found[j]) })
	return found
}

// oneLine keeps a driver's multi-line message on the one line serve prints.
func oneLine(err error) error {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}
