package generation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
)

// Outputs are where a run writes: each image into Dir (new, empty, or with Overwrite the
// images of an earlier run replaced), the grid of all of them at Grid ("" = next to Dir,
// "none" = no grid) and, for a speculative run, the acceptance map at Heatmap ("" = none).
type Outputs struct {
	Dir, Grid, Heatmap string
	Overwrite          bool
}

// GridPath is where the grid goes ("none": no grid).
func (o Outputs) GridPath() string {
	if o.Grid == "" {
		return GridPath(o.Dir)
	}
	return o.Grid
}

// Check checks every output path of a run in mode before anything is opened or written, so a
// run never fails at its end for a bad path, and a refused run creates nothing.
func (o Outputs) Check(mode string) error {
	if o.Heatmap != "" {
		if mode != ModeSpec {
			return fieldErr("heatmap", strconv.Quote(o.Heatmap), "omit it, or use mode spec",
				"a "+mode+"-only run verifies no drafts, so it has no acceptance map")
		}
		if err := CheckFileTarget("heatmap", o.Heatmap); err != nil {
			return err
		}
	}
	if grid := o.GridPath(); grid != "none" {
		if err := CheckFileTarget("grid", grid); err != nil {
			return err
		}
	}
	if err := CheckFolderTarget("out", o.Dir); err != nil {
		return err
	}
	if entries, err := os.ReadDir(o.Dir); err == nil && len(entries) > 0 && !o.Overwrite {
		_, _, err := PrepareFolder(o.Dir, false, nil) // names what the folder holds
		return err
	}
	return nil
}

// Prepare makes the folders of every output (remembered in made) and readies Dir; it returns
// how many images of an earlier run it removed and the other files it left. Check first.
func (o Outputs) Prepare(made *Created) (removed int, kept []string, err error) {
	if o.Heatmap != "" {
		if err := made.ParentOf("heatmap", o.Heatmap); err != nil {
			return 0, nil, err
		}
	}
	if grid := o.GridPath(); grid != "none" {
		if err := made.ParentOf("grid", grid); err != nil {
			return 0, nil, err
		}
	}
	return PrepareFolder(o.Dir, o.Overwrite, made)
}

// Written is what a run left on disk.
type Written struct {
	Result      Result  // the finished run (empty when interrupted)
	Images      []Image // the images written, in index order
	Grid        string  // the grid's path, "" when none was drawn
	Heatmap     string  // the acceptance map's path, "" when none was drawn
	Interrupted bool    // ctx ended first: Images are those finished by then
}

// Summary says what the run wrote into dir (of planned images), or, interrupted, what it kept.
func (w Written) Summary(dir string, planned int) string {
	if w.Interrupted {
		msg := fmt.Sprintf("interrupted: kept the %d of %d images finished, in %s", len(w.Images), planned, dir)
		if w.Grid != "" {
			msg += ", their grid in " + w.Grid
		}
		return msg
	}
	return WroteSummary(len(w.Images), dir, w.Grid, w.Heatmap)
}

// WroteSummary says that n images went into dir, and the grid and acceptance map (each ""
// when none was drawn) where they went.
func WroteSummary(n int, dir, grid, heatmap string) string {
	msg := fmt.Sprintf("wrote %d images to %s", n, dir)
	if grid != "" {
		msg += ", the grid to " + grid
	}
	if heatmap != "" {
		msg += ", the acceptance map to " + heatmap
	}
	return msg
}

// WriteRun runs the plan with gen, writing each image into o.Dir as soon as it is finished
// (watch.Image hears of it once written, watch.Step of each AR step: progress), then the grid and
// the acceptance map. If ctx ends first
// it keeps the images already written and draws their grid; if the run fails it removes
// everything made records. Call o.Prepare first.
func WriteRun(ctx context.Context, plan Plan, gen Generator, o Outputs, made *Created, watch Watch) (Written, error) {
	var (
		mu       sync.Mutex
		finished []Image
		saveErr  error
		stopped  bool
	)
	keep := func(img Image) {
		mu.Lock()
		defer mu.Unlock()
		if stopped || saveErr != nil {
			return
		}
		path, err := plan.SavePNG(o.Dir, img)
		if err != nil {
			saveErr = fmt.Errorf("writing image %d: %w", img.Index, err)
			return
		}
		made.File(path)
		finished = append(finished, img)
		if watch.Image != nil {
			watch.Image(img)
		}
	}
	type outcome struct {
		res Result
		err error
	}
	ended := make(chan outcome, 1)
	go func() {
		res, err := gen.GenerateWatched(ctx, plan.Classes, 0, Watch{Image: keep, Step: watch.Step})
		ended <- outcome{res, err}
	}()
	var out outcome
	select {
	case out = <-ended:
	case <-ctx.Done():
	}
	mu.Lock()
	stopped = true
	kept := slices.Clone(finished)
	err := errors.Join(out.err, saveErr)
	mu.Unlock()
	slices.SortFunc(kept, func(a, b Image) int { return a.Index - b.Index })
	grid := o.GridPath()
	if ctx.Err() != nil {
		w := Written{Images: kept, Interrupted: true}
		if grid != "none" && len(kept) > 0 && plan.WriteGrid(grid, kept) == nil {
			w.Grid = grid
		}
		return w, nil
	}
	if err != nil {
		made.Undo()
		return Written{}, err
	}
	w := Written{Result: out.res, Images: out.res.Images}
	if grid != "none" {
		if err := plan.WriteGrid(grid, out.res.Images); err != nil {
			made.Undo()
			return Written{}, err
		}
		made.File(grid)
		w.Grid = grid
	}
	if o.Heatmap != "" {
		if err := plan.WriteHeatmap(o.Heatmap, out.res.Summary); err != nil {
			made.Undo()
			return Written{}, err
		}
		w.Heatmap = o.Heatmap
	}
	return w, nil
}
