package generation

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"marspec/api"
	"marspec/arsampler"
)

// Files of a run: every image as NNNN_classC_slug.png in the output folder, which then holds
// samples only (what `marspec fid` scores); the grid of all of them and the acceptance heatmap
// go elsewhere.

// ownImage matches the names FileName gives: the only files --overwrite removes.
var ownImage = regexp.MustCompile(`^[0-9]{4,}_class[0-9]+_[a-z0-9-]*\.png$`)

// FileName is the name of image img of the plan in its output folder.
func (p Plan) FileName(img Image) string {
	return fmt.Sprintf("%04d_class%d_%s.png", img.Index, img.Class, Slug(p.ClassNames[img.Index]))
}

// PrepareFolder readies dir for a run's images before anything is generated, so a run never
// mixes with an earlier one (whose images `marspec fid` would then score too): a missing
// folder is created (with its parents, remembered in c so a failed run removes them), an
// empty one taken; a folder holding files is refused unless overwrite, which removes the
// images an earlier run named as FileName does and nothing else. It returns how many it
// removed and the other files it left.
func PrepareFolder(dir string, overwrite bool, c *Created) (removed int, kept []string, err error) {
	if dir == "" {
		return 0, nil, fieldErr("out", "", "a folder", "missing")
	}
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0, nil, c.Folder("out", dir)
	}
	if err != nil {
		return 0, nil, fieldErr("out", dir, "a folder", err.Error())
	}
	var own []string
	for _, e := range entries {
		if !e.IsDir() && ownImage.MatchString(e.Name()) {
			own = append(own, e.Name())
		} else {
			kept = append(kept, e.Name())
		}
	}
	if len(entries) == 0 {
		return 0, nil, nil
	}
	if !overwrite {
		return 0, nil, fieldErr("out", dir, "an empty or new folder, or --overwrite to replace the images of an earlier run",
			fmt.Sprintf("holds %d files (%d of them images of an earlier run)", len(entries), len(own)))
	}
	for _, name := range own {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return removed, kept, err
		}
		removed++
	}
	return removed, kept, nil
}

// CheckFileTarget makes sure a file can be written at path before a run spends minutes
// generating, without creating anything: path is not a folder, and the nearest existing
// folder above it is a folder (missing ones are created when the run starts: Created.ParentOf).
// field names the setting that gave it.
func CheckFileTarget(field, path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fieldErr(field, strconv.Quote(path), "a file name", "is a folder")
	}
	for d := filepath.Dir(filepath.Clean(path)); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fieldErr(field, strconv.Quote(path), "a file in a folder", d+" is a file, not a folder")
			}
			return nil
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

// CheckFolderTarget is CheckFileTarget for a folder a command will make or fill: it is a
// folder or missing, and the nearest existing path above it is a folder.
func CheckFolderTarget(field, dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fieldErr(field, strconv.Quote(dir), "a folder", "is a file")
		}
		return nil
	}
	return CheckFileTarget(field, filepath.Join(dir, "x"))
}

// SavePNG writes one image of the plan into dir under FileName and returns its path.
func (p Plan) SavePNG(dir string, img Image) (string, error) {
	data, err := p.PNG(img)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, p.FileName(img))
	return path, os.WriteFile(path, data, 0o644)
}

// SaveImages writes every image to dir under FileName, each with its provenance.
func (p Plan) SaveImages(dir string, imgs []Image) error {
	for _, img := range imgs {
		if _, err := p.SavePNG(dir, img); err != nil {
			return err
		}
	}
	return nil
}

// WireAcceptanceRates is AcceptanceRates from the per-image statistics of a finished job as
// the service reports it, with the token grid's height and width (ok false without
// statistics: not a speculative job).
func WireAcceptanceRates(imgs []api.Image) (rates []float64, gridH, gridW int, ok bool) {
	var sum arsampler.Summary
	for _, im := range imgs {
		st := im.Stats
		if st == nil {
			continue
		}
		if sum.AcceptedAtPos == nil {
			sum.AcceptedAtPos, sum.RejectedAtPos = make([]int, len(st.AcceptedAtPos)), make([]int, len(st.RejectedAtPos))
			gridH, gridW, ok = st.GridHeight, st.GridWidth, true
		}
		for i := range min(len(st.AcceptedAtPos), len(sum.AcceptedAtPos)) {
			sum.AcceptedAtPos[i] += st.AcceptedAtPos[i]
		}
		for i := range min(len(st.RejectedAtPos), len(sum.RejectedAtPos)) {
			sum.RejectedAtPos[i] += st.RejectedAtPos[i]
		}
	}
	if !ok {
		return nil, 0, 0, false
	}
	return AcceptanceRates(&sum), gridH, gridW, true
}

// GridPath is where a run writing its images to dir puts the grid by default: next to the
// folder, not in it ("out/run" -> "out/run-grid.png").
func GridPath(dir string) string {
	clean := filepath.Clean(dir)
	if clean == "." || clean == "/" || strings.HasSuffix(clean, string(filepath.Separator)+"..") || clean == ".." {
		return filepath.Join(clean, "..", filepath.Base(mustAbs(clean))+"-grid.png")
	}
	return clean + "-grid.png"
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
