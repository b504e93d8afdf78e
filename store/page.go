package store

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Keyset pages of the job list. An offset page costs the rows it skips and a count of every
// match; a page after a cursor (the last job of the page before) reads only its own rows
// from the index on (created DESC, id), however deep it is and however many jobs there are.

// Cursor is where a page of jobs ends: the next page holds the jobs listed after it (newest
// first, ties in id order).
type Cursor struct {
	Created time.Time
	ID      string
}

// CursorOf is the cursor after job j.
func CursorOf(j Job) Cursor { return Cursor{Created: j.Created, ID: j.ID} }

// String encodes the cursor for a URL: "NANOS_ID".
func (c Cursor) String() string { return strconv.FormatInt(c.Created.UnixNano(), 10) + "_" + c.ID }

// ParseCursor decodes String's form.
func ParseCursor(s string) (Cursor, error) {
	nanos, id, ok := strings.Cut(s, "_")
	n, err := strconv.ParseInt(nanos, 10, 64)
	if !ok || err != nil || id == "" || len(id) > 64 {
		return Cursor{}, errors.New("not a cursor (use the next of the page before)")
	}
	return Cursor{Created: time.Unix(0, n).UTC(), ID: id}, nil
}

// imagesByJob groups image records by job, each in index order as read.
func imagesByJob(imgs []Image) map[string][]Image {
	out := map[string][]Image{}
	for _, im := range imgs {
		out[im.JobID] = append(out[im.JobID], im)
	}
	return out
}
