package tests

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"image"
	"image/png"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/server"
	"marspec/web"
)

// TestFullSizeThroughServe is MAR-B's path through the service at a few MB: random packs with
// its token layout (16x16 tokens of 16 dims, 1,000 classes) and a KL-16-shaped decoder (stride
// 16, 16 latent channels, 3 output channels), made by make_random_packs.py, served as
// `marspec serve --target T --draft D --threads 1` serves them. One image in target mode and
// one in spec mode come back as 256x256 colour PNGs, are listed by the API, and classes are
// named by name among the 1,000.
func TestFullSizeThroughServe(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	target, draft := randomPack(t, "ci_target", ""), randomPack(t, "ci_draft", "")
	for _, p := range []string{target, draft} {
		if size := dirSize(t, p); size > 8<<20 {
			t.Errorf("%s is %d bytes; the CI packs should stay a few MB", p, size)
		}
	}
	c := serveFlags(t, lib, "--target", target, "--draft", draft, "--threads", "1", "--device", "cpu")
	ctx := t.Context()

	models, err := c.Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(models.Models) != 2 || models.Models[0].Image != [3]int{256, 256, 3} || len(models.Models[0].Classes) != 1000 || models.Models[1].Role != "draft" {
		t.Fatalf("GET /v1/models: %+v; want a 256x256x3 target with 1000 classes and a draft", models.Models)
	}

	// the packs carry MAR-B's published settings (export_mar.py), so the README's POST
	// ({"class":1,"n":1}) runs MAR-B's evaluation setting, not the embedded toy's presets
	if strings.Join(models.Presets, ",") != "paper,speed,unguided" || models.DefaultPreset != "paper" || models.PresetsOf != target ||
		!strings.HasPrefix(models.PresetInfo["paper"].Provenance, "published: MAR official README, MAR-B evaluation command") {
		t.Errorf("GET /v1/models presets %v default %q of %q, paper's provenance %q; want MAR-B's published ones", models.Presets,
			models.DefaultPreset, models.PresetsOf, models.PresetInfo["paper"].Provenance)
	}
	one := uint64(1)
	readme := generateOne(t, c, api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Seed: &one}, 1)
	if s := readme.Settings; s.Preset != "paper" || s.Mode != "target" || s.CFG != 2.9 || s.CFGSchedule != "linear" ||
		s.Temperature != 1 || s.NumIter != 256 || s.Steps != 100 || s.Sampler != "" {
		t.Errorf("the README's POST ran %+v; want preset paper: cfg 2.9 linear, temperature 1, num_iter 256, 100 ddpm steps", s)
	}

	seed, numIter, steps, gamma := uint64(3), 4, 3, api.Gamma("4")
	asTarget := api.GenerateRequest{Class: api.Classes{"class_207"}, N: 1, Seed: &seed, Mode: "target", NumIter: &numIter, Steps: &steps}
	tg := generateOne(t, c, asTarget, 207)
	asSpec := api.GenerateRequest{Class: api.Classes{"999"}, N: 1, Seed: &seed, Mode: "spec", Steps: &steps, Gamma: gamma}
	sg := generateOne(t, c, asSpec, 999)
	if st := sg.Images[0].Stats; st == nil || st.GridHeight != 16 || st.GridWidth != 16 || len(st.AcceptedAtPos) != 256 {
		t.Errorf("spec image statistics %+v; want a 16x16 grid of positions", st)
	}

	// listed, and filtered by a class named among the thousand
	all, err := c.List(ctx, api.ListOptions{})
	if err != nil || all.Total != 3 {
		t.Fatalf("list: %+v, %v; want the 3 jobs", all, err)
	}
	byName, err := c.List(ctx, api.ListOptions{Class: "class_207"})
	if err != nil || byName.Total != 1 || byName.Generations[0].ID != tg.ID {
		t.Fatalf("list class_207: %+v, %v; want job %s alone", byName, err, tg.ID)
	}
	_, err = c.List(ctx, api.ListOptions{Class: "dog"})
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Body.Field != "class" ||
		!strings.Contains(apiErr.Body.Error, "1000 names") || len(apiErr.Body.Error) > 400 {
		t.Errorf("list class dog: %v; want a short 400 on class naming the 1000 names' place", err)
	}

	// the grid keeps full-size cells at their size (tiny ones are scaled up 4 times)
	grid, err := c.Image(ctx, sg.Links.Grid)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(grid)); err != nil || cfg.Width < 256 || cfg.Width > 2*256 {
		t.Errorf("grid of one 256x256 image is %d px wide (%v); want the cell at 256 px plus its label", cfg.Width, err)
	}
}

// serveFlags starts what `marspec serve ARGS` starts, on a free loopback port with a
// temporary data folder, and returns a client for it; the server stops when the test ends.
func serveFlags(t *testing.T, lib string, args ...string) *api.Client {
	t.Helper()
	var cfg server.Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	if err := cfg.Bind(fs); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(append(args, "--data-dir", t.TempDir(), "--ort-lib", lib)); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	models := &generation.ORTModels{ORTLib: cfg.ORTLib, Provider: cfg.Device, Threads: cfg.Threads}
	srv, st, err := server.Open(cfg, models, web.FS, log)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeUntilDone(ctx, ln, log) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		st.Close()
	})
	c, err := api.NewClient("http://"+ln.Addr().String(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// generateOne posts req (one image of class id want), waits for it, and checks the job
// succeeded with one 256x256 colour PNG of that class.
func generateOne(t *testing.T, c *api.Client, req api.GenerateRequest, want int) *api.Generation {
	t.Helper()
	g, err := c.Generate(t.Context(), req, 40*time.Second)
	if err != nil {
		t.Fatalf("POST %s: %v", req.Mode, err)
	}
	if g.Status != api.StatusSucceeded || len(g.Images) != 1 || (req.Mode != "" && g.Settings.Mode != req.Mode) {
		t.Fatalf("%s job %s: %s (%s), %d images, mode %s; want succeeded, 1, %s", req.Mode, g.ID, g.Status, g.Error, len(g.Images), g.Settings.Mode, req.Mode)
	}
	im := g.Images[0]
	if im.Class != want || im.ClassName != g.Settings.ClassNames[0] {
		t.Errorf("%s image: class %d %q, want %d (settings name %q)", req.Mode, im.Class, im.ClassName, want, g.Settings.ClassNames[0])
	}
	data, err := c.Image(t.Context(), im.URL)
	if err != nil {
		t.Fatal(err)
	}
	pic, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", im.URL, err)
	}
	checkColour(t, req.Mode+" image", pic)
	return g
}

// checkColour fails unless pic is 256x256 with three channels that differ somewhere (a grey
// or flat picture would mean the decoder's colour did not reach the PNG).
func checkColour(t *testing.T, what string, pic image.Image) {
	t.Helper()
	b := pic.Bounds()
	if b.Dx() != 256 || b.Dy() != 256 {
		t.Fatalf("%s is %dx%d, want 256x256", what, b.Dx(), b.Dy())
	}
	if _, grey := pic.(*image.Gray); grey {
		t.Fatalf("%s is a grey PNG, want colour", what)
	}
	coloured, first, varied := 0, pic.At(0, 0), false
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			px := pic.At(x, y)
			r, g, bl, _ := px.RGBA()
			if r != g || g != bl {
				coloured++
			}
			varied = varied || px != first
		}
	}
	if coloured < b.Dx()*b.Dy()/10 || !varied {
		t.Errorf("%s: %d of %d pixels have unequal channels, varied %v; want a colour picture", what, coloured, b.Dx()*b.Dy(), varied)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
