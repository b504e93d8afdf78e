package generation

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"marspec/api"
)

func writeTestPlan(t *testing.T, mode string, n int) (Plan, Generator) {
	t.Helper()
	models, cat := TestModels()
	seed := uint64(4)
	plan, err := Validate(api.GenerateRequest{Class: api.Classes{"0", "1"}, N: n, Seed: &seed, Mode: mode}, cat)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := NewGenerator(plan, models, 2)
	if err != nil {
		t.Fatal(err)
	}
	return plan, gen
}

// A run writes every image, its grid and (spec) its acceptance map where Outputs say, making
// missing folders; each image is announced as it is written.
func TestWriteRun(t *testing.T) {
	plan, gen := writeTestPlan(t, ModeSpec, 3)
	root := t.TempDir()
	o := Outputs{Dir: filepath.Join(root, "new", "imgs"), Heatmap: filepath.Join(root, "maps", "heat.png")}
	if err := o.Check(plan.Mode); err != nil {
		t.Fatal(err)
	}
	var made Created
	if _, _, err := o.Prepare(&made); err != nil {
		t.Fatal(err)
	}
	announced := 0
	w, err := WriteRun(context.Background(), plan, gen, o, &made, Watch{Image: func(Image) { announced++ }})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(o.Dir)
	if w.Interrupted || len(w.Images) != 6 || len(files) != 6 || announced != 6 || w.Grid != GridPath(o.Dir) || w.Heatmap != o.Heatmap {
		t.Fatalf("written %+v, %d files, %d announced", w, len(files), announced)
	}
	for _, f := range []string{w.Grid, w.Heatmap} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if err := (Outputs{Dir: o.Dir}).Check(ModeTarget); Field(err) != "out" {
		t.Errorf("a folder holding a run, without Overwrite: %v", err)
	}
	if err := (Outputs{Dir: t.TempDir(), Heatmap: "h.png"}).Check(ModeTarget); Field(err) != "heatmap" {
		t.Errorf("a heatmap for a target-only run: %v", err)
	}
}

// Interrupted before it starts, a run keeps what it finished (nothing here) and says so;
// nothing made is removed, as the user's Ctrl-C keeps finished images.
func TestWriteRunInterrupted(t *testing.T) {
	plan, gen := writeTestPlan(t, ModeTarget, 2)
	o := Outputs{Dir: filepath.Join(t.TempDir(), "imgs")}
	var made Created
	if _, _, err := o.Prepare(&made); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w, err := WriteRun(ctx, plan, gen, o, &made, Watch{})
	if err != nil || !w.Interrupted || w.Grid != "" && len(w.Images) == 0 {
		t.Fatalf("written %+v, %v", w, err)
	}
	if _, err := os.Stat(o.Dir); err != nil {
		t.Errorf("the folder of an interrupted run is gone: %v", err)
	}
}
