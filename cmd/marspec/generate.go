package main

import (
	"flag"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"

	"marspec/mar"
	"marspec/render"
)

// maxImages bounds one request: larger runs belong to `marspec eval` with its own batching.
const maxImages = 10000

func runGenerate(args []string) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	rt := addRuntimeFlags(fs)
	model := fs.String("model", "target", "model pack: target, draft (embedded) or a pack folder")
	class := fs.String("class", "all", "class index, class name, or 'all' (n images of every class)")
	n := fs.Int("n", 1, "images per class")
	seed := fs.Uint64("seed", 0, "random seed: the same seed and options give the same image bytes")
	out := fs.String("out", "out", "output folder")
	cfg := fs.Float64("cfg", 1, "classifier-free guidance scale (1 = off)")
	cfgSchedule := fs.String("cfg-schedule", "linear", "guidance schedule over AR steps: linear (MAR) or constant")
	temp := fs.Float64("temperature", 1, "diffusion sampling temperature")
	numIter := fs.Int("num-iter", 0, "AR steps (0 = one token per step)")
	steps := fs.Int("steps", 0, "diffusion sampling steps (0 = the pack's)")
	batch := fs.Int("batch", 0, "images per batch (0 = all at once, up to 64)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	m, err := rt.open(*model)
	if err != nil {
		return err
	}
	classes, err := requestedClasses(m.Manifest, *class, *n)
	if err != nil {
		return err
	}
	if *batch == 0 {
		*batch = min(64, len(classes))
	}
	opt := mar.Options{Seed: *seed, CFG: *cfg, CFGSchedule: *cfgSchedule, Temperature: *temp,
		NumIter: *numIter, Steps: *steps, Batch: *batch}
	if err := m.Validate(&opt); err != nil {
		return err
	}
	images, err := m.Generate(classes, opt)
	if err != nil {
		return err
	}
	return saveImages(*out, m, images, opt, *model)
}

func requestedClasses(man *mar.Manifest, class string, n int) ([]int, error) {
	if n < 1 || n > maxImages {
		return nil, fmt.Errorf("--n %d out of range (allowed: 1 to %d)", n, maxImages)
	}
	var ids []int
	if class == "all" {
		for c := range man.Classes {
			ids = append(ids, c)
		}
	} else {
		c, err := man.ClassIndex(class)
		if err != nil {
			return nil, err
		}
		ids = []int{c}
	}
	if len(ids)*n > maxImages {
		return nil, fmt.Errorf("%d images requested (allowed: at most %d)", len(ids)*n, maxImages)
	}
	var classes []int
	for _, c := range ids {
		for i := 0; i < n; i++ {
			classes = append(classes, c)
		}
	}
	return classes, nil
}

func saveImages(dir string, m *mar.Model, images []mar.Image, opt mar.Options, model string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	man := m.Manifest
	var cells []image.Image
	for _, im := range images {
		img, err := render.FromPixels(im.Pixels, man.Image.Height, man.Image.Width, man.Image.Channels)
		if err != nil {
			return err
		}
		params := fmt.Sprintf("model=%s pack=%s class=%d (%s) index=%d seed=%d cfg=%g cfg_schedule=%s temperature=%g num_iter=%d steps=%d",
			model, man.Name, im.Class, man.Classes[im.Class], im.Index, opt.Seed, opt.CFG, opt.CFGSchedule, opt.Temperature, opt.NumIter, opt.Steps)
		name := fmt.Sprintf("%04d_class%d_%s.png", im.Index, im.Class, slug(man.Classes[im.Class]))
		if err := render.WritePNG(filepath.Join(dir, name), img, params); err != nil {
			return err
		}
		cells = append(cells, img)
	}
	cols := len(images)
	if n := countPerClass(images); n > 0 && n < len(images) {
		cols = n
	}
	cols = min(cols, 16)
	grid := render.Grid(cells, cols, 4)
	if err := render.WritePNG(filepath.Join(dir, "grid.png"), grid, ""); err != nil {
		return err
	}
	fmt.Printf("wrote %d images and grid.png to %s\n", len(images), dir)
	return nil
}

// countPerClass returns how many consecutive images share the first class (a grid row each).
func countPerClass(images []mar.Image) int {
	n := 0
	for n < len(images) && images[n].Class == images[0].Class {
		n++
	}
	return n
}

func slug(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}
