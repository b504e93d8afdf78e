package server

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
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
		return nil, fmt.Errorf("--store %s: %w", redact(cfg.Store), oneLine(err))
	}
	blobs, err := openBlobs(cfg.Blobs, cfg.DataDir)
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("--blobs %s: %w", redact(cfg.Blobs), oneLine(err))
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

// redact hides a URL's password (--store postgres://user:secret@…, --blobs s3://KEY:SECRET@…).
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	if _, has := p.User.Password(); has {
		p.User = url.UserPassword(p.User.Username(), "xxxxx")
	}
	return p.String()
}

// oneLine keeps a driver's multi-line message on the one line serve prints.
func oneLine(err error) error {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}
