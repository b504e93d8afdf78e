package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ImageID is the id of image index of job.
func ImageID(job string, index int) string { return fmt.Sprintf("%s-%d", job, index) }

func (s *Store) pngPath(job string, index int) string {
	return filepath.Join(s.dir, "images", job, fmt.Sprintf("%d.png", index))
}

// AddImage writes the PNG atomically, then records the image. A crash between the two leaves
// a file with no row: the image is made again on resume and the file replaced.
func (s *Store) AddImage(img Image, png []byte) error {
	path := s.pngPath(img.JobID, img.Index)
	if err := writeAtomic(path, png); err != nil {
		return err
	}
	var stats any
	if img.Stats != nil {
		b, err := json.Marshal(img.Stats)
		if err != nil {
			return err
		}
		stats = string(b)
	}
	_, err := s.db.Exec(`INSERT OR REPLACE INTO images (id, job_id, idx, class, class_name, seconds, stats) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		img.ID, img.JobID, img.Index, img.Class, img.ClassName, img.Seconds, stats)
	return err
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

func scanImage(row interface{ Scan(...any) error }) (Image, error) {
	var im Image
	var stats sql.NullString
	if err := row.Scan(&im.ID, &im.JobID, &im.Index, &im.Class, &im.ClassName, &im.Seconds, &stats); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return im, ErrNotFound
		}
		return im, err
	}
	if stats.Valid {
		if err := json.Unmarshal([]byte(stats.String), &im.Stats); err != nil {
			return im, fmt.Errorf("image %s: stored statistics: %w", im.ID, err)
		}
	}
	return im, nil
}

const imageCols = `id, job_id, idx, class, class_name, seconds, stats`

// Images returns a job's images in index order.
func (s *Store) Images(job string) ([]Image, error) {
	rows, err := s.db.Query(`SELECT `+imageCols+` FROM images WHERE job_id = ? ORDER BY idx`, job)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Image
	for rows.Next() {
		im, err := scanImage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, im)
	}
	return out, rows.Err()
}

// ImagePNG returns the bytes of a stored image.
func (s *Store) ImagePNG(id string) ([]byte, error) {
	im, err := scanImage(s.db.QueryRow(`SELECT `+imageCols+` FROM images WHERE id = ?`, id))
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.pngPath(im.JobID, im.Index))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("image %s: file missing: %w", id, err)
	}
	return data, err
}
