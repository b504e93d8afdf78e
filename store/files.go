package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Files is a Blobs in a folder: key "JOB/INDEX.png" is the file root/JOB/INDEX.png.
type Files struct{ root string }

// NewFiles creates root if needed.
func NewFiles(root string) (*Files, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("image folder %s: %w", root, err)
	}
	return &Files{root: root}, nil
}

// path maps a key to a file, refusing keys that would leave root (the server validates ids
// already; this keeps the store safe on its own).
func (f *Files) path(key string) (string, error) {
	if !filepath.IsLocal(key) {
		return "", fmt.Errorf("blob key %q is not a local path", key)
	}
	return filepath.Join(f.root, filepath.FromSlash(key)), nil
}

// Put writes data atomically.
func (f *Files) Put(key string, data []byte) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	return blobErr(writeAtomic(p, data))
}

// Get reads a blob; ErrNotFound if it is missing.
func (f *Files) Get(key string) ([]byte, error) {
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("file %s missing: %w", key, ErrNotFound)
	}
	return data, blobErr(err)
}

// Delete removes one blob.
func (f *Files) Delete(key string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("file %s missing: %w", key, ErrNotFound)
	}
	return blobErr(err)
}

// Keys calls each with every blob's key ("JOB/INDEX.png"); temporary files of writes under
// way are not blobs.
func (f *Files) Keys(each func(key string) error) error {
	return blobErr(filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".tmp-") {
			return err
		}
		rel, err := filepath.Rel(f.root, p)
		if err != nil {
			return err
		}
		return each(filepath.ToSlash(rel))
	}))
}

// DeleteJob removes the job's folder.
func (f *Files) DeleteJob(job string) error {
	p, err := f.path(job)
	if err != nil {
		return err
	}
	return blobErr(os.RemoveAll(p))
}

// writeAtomic writes data to a temporary file in path's folder, syncs it and renames it over
// path: readers see the old file or the whole new one.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}
