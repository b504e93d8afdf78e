package generation

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Created remembers the folders and files a command made, so that a command failing midway
// removes exactly those and leaves the disk as it found it: no empty --out folder after a
// refused request, no half-written grid. The zero value is ready to use.
type Created struct {
	dirs  []string // outermost first
	files []string
}

// Folder makes dir and any missing parents, remembering those it made; field names the
// setting that gave it, for the error.
func (c *Created) Folder(field, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fieldErr(field, strconv.Quote(dir), "a folder path", d+" is a file")
			}
			break
		}
		missing = append(missing, d)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	slices.Reverse(missing)
	for _, d := range missing {
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return fieldErr(field, strconv.Quote(dir), "a folder that can be created", err.Error())
		}
		c.dirs = append(c.dirs, d)
	}
	return nil
}

// ParentOf makes the folder a file at path will go in (Folder of its directory).
func (c *Created) ParentOf(field, path string) error {
	return c.Folder(field, filepath.Dir(path))
}

// File remembers a file the command wrote.
func (c *Created) File(path string) { c.files = append(c.files, path) }

// Undo removes the remembered files, then the remembered folders innermost first, each only if
// empty: a folder that came to hold something else is left as it is.
func (c *Created) Undo() {
	for _, f := range slices.Backward(c.files) {
		_ = os.Remove(f)
	}
	for _, d := range slices.Backward(c.dirs) {
		_ = os.Remove(d) // fails, and keeps it, when not empty
	}
	c.files, c.dirs = nil, nil
}
