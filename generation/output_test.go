package generation

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/api"
	"marspec/render"
)

// An output folder holding an earlier run's images is refused (they would be scored with the
// new ones); --overwrite removes only files named as a run names its images.
func TestPrepareFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, _, err := PrepareFolder(dir, false, &Created{}); err != nil {
		t.Fatalf("a new folder: %v", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("folder not created: %v", err)
	}
	for _, name := range []string{"0000_class3_dress.png", "0011_class0_t-shirt-top.png", "notes.txt", "mine.png"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644)
	}
	_, _, err := PrepareFolder(dir, false, &Created{})
	if Field(err) != "out" || !strings.Contains(err.Error(), "holds 4 files (2 of them images of an earlier run)") {
		t.Fatalf("a non-empty folder: %v", err)
	}
	removed, kept, err := PrepareFolder(dir, true, &Created{})
	if err != nil || removed != 2 || strings.Join(kept, ",") != "mine.png,notes.txt" {
		t.Fatalf("overwrite: removed %d, kept %v, %v", removed, kept, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mine.png")); err != nil {
		t.Fatal("overwrite removed a file it did not write")
	}
}

// The grid is not written into the image folder (which `marspec fid` scores); an output in a
// missing folder is allowed (the folder is made when the run starts), one under a file or
// naming a folder is refused before generating.
func TestGridPathAndFileTargets(t *testing.T) {
	for dir, want := range map[string]string{"out/run": "out/run-grid.png", "out/run/": "out/run-grid.png", "run": "run-grid.png"} {
		if got := GridPath(dir); got != want {
			t.Errorf("GridPath(%q) = %q, want %q", dir, got, want)
		}
	}
	if got := GridPath("."); strings.HasPrefix(filepath.Clean(got), "grid") || filepath.Dir(got) == "." {
		t.Errorf("GridPath(.) = %q lies in the image folder", got)
	}
	tmp := t.TempDir()
	if err := CheckFileTarget("heatmap", filepath.Join(tmp, "no", "deeper", "heat.png")); err != nil {
		t.Errorf("missing folders: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "no")); !os.IsNotExist(err) {
		t.Errorf("the check created a folder: %v", err)
	}
	os.WriteFile(filepath.Join(tmp, "file"), []byte("x"), 0o644)
	if err := CheckFileTarget("grid", filepath.Join(tmp, "file", "sub", "grid.png")); Field(err) != "grid" || !strings.Contains(err.Error(), "is a file") {
		t.Errorf("a file in the way: %v", err)
	}
	if err := CheckFileTarget("heatmap", tmp); Field(err) != "heatmap" {
		t.Errorf("a folder as the file: %v", err)
	}
	if err := CheckFileTarget("heatmap", filepath.Join(tmp, "heat.png")); err != nil {
		t.Error(err)
	}
}

func TestSaveImagesGridAndHeatmap(t *testing.T) {
	models, cat := TestModels()
	plan, err := Validate(api.GenerateRequest{Class: api.Classes{"t-shirt-top", "2"}, N: 2, Seed: u64(9), Mode: ModeSpec}, cat)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(context.Background(), plan, models, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "imgs")
	if _, _, err := PrepareFolder(dir, false, &Created{}); err != nil {
		t.Fatal(err)
	}
	if err := plan.SaveImages(dir, res.Images); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "0000_class0_t-shirt-top.png 0001_class0_t-shirt-top.png 0002_class2_pullover.png 0003_class2_pullover.png" {
		t.Fatalf("files %v", names)
	}
	data, _ := os.ReadFile(filepath.Join(dir, names[2]))
	if p := render.ReadParameters(data); !strings.Contains(p, "class=2 (Pullover) index=2") || !strings.Contains(p, "seed=9") {
		t.Fatalf("provenance %q", p)
	}
	if err := plan.WriteGrid(GridPath(dir), res.Images); err != nil {
		t.Fatal(err)
	}
	if err := plan.WriteHeatmap(filepath.Join(t.TempDir(), "heat.png"), res.Summary); err != nil {
		t.Fatal(err)
	}
	if err := plan.WriteHeatmap(filepath.Join(t.TempDir(), "heat.png"), nil); Field(err) != "heatmap" {
		t.Fatalf("heatmap of a run without drafts: %v", err)
	}
	// the folder holds the samples only: what fid reads
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Fatalf("the image folder holds %d files, want the 4 images", len(entries))
	}
}

// What a command made is removed by Undo, innermost first, and nothing that was there before
// or came to share a made folder.
func TestCreatedUndoRemovesOnlyWhatWasMade(t *testing.T) {
	tmp := t.TempDir()
	var c Created
	deep := filepath.Join(tmp, "a", "b", "c")
	if err := c.Folder("out", deep); err != nil {
		t.Fatal(err)
	}
	if err := c.ParentOf("grid", filepath.Join(tmp, "g", "grid.png")); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(deep, "0000_class0_x.png")
	os.WriteFile(img, []byte("x"), 0o644)
	c.File(img)
	stranger := filepath.Join(tmp, "g", "theirs.txt") // written by someone else meanwhile
	os.WriteFile(stranger, []byte("x"), 0o644)
	c.Undo()
	if _, err := os.Stat(filepath.Join(tmp, "a")); !os.IsNotExist(err) {
		t.Errorf("made folders left behind: %v", err)
	}
	if _, err := os.Stat(stranger); err != nil {
		t.Errorf("a file the command did not write was removed: %v", err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Errorf("the folder that existed before was removed: %v", err)
	}
}
