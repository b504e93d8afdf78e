package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"marspec/generation"
	"marspec/remote"
	"marspec/render"
)

// localOnly are generate's flags that a server does not take: it runs its own packs and
// runtime, and its wire has no self-drafting, early exit, lossy knobs or annealing.
var localOnly = []string{"model", "target", "draft", "batch", "steps-late", "rejection", "tolerance", "exit-max-error", "threads", "device", "provider", "ort-lib"}

// runOnServer is `generate --server URL`: the same request, checked and run by the server,
// its images written into --out under the names a local run gives, the grid and heatmap drawn
// here from them.
func (g *generateFlags) runOnServer(set map[string]bool) error {
	for _, name := range localOnly {
		if set[name] {
			return &generation.FieldError{Field: name, Allowed: "omit it with --server", Reason: "the server runs its own packs and settings; this flag applies to a local run only"}
		}
	}
	if g.n < 1 { // the wire reads n 0 as "the default"
		return &generation.FieldError{Field: "n", Value: strconv.Itoa(g.n), Allowed: "at least 1 image per class"}
	}
	req, _, err := g.request(set, false)
	if err != nil {
		return err
	}
	if err := generation.CheckNumbers(req.GenerateRequest); err != nil {
		return err
	}
	mode, _, _, err := generation.ResolveMode(req)
	if err != nil {
		return err
	}
	if err := g.outputs().Check(mode); err != nil {
		return err
	}
	var made generation.Created
	grid, err := g.prepareOutputs(&made)
	if err != nil {
		made.Undo()
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) // Ctrl-C cancels the job there
	defer stop()
	token := g.token
	if token == "" {
		token = os.Getenv("MARSPEC_TOKEN")
	}
	var progressOut io.Writer = os.Stderr
	if g.quiet {
		progressOut = nil
	}
	job, files, err := remote.Generate(ctx, g.server, token, req.GenerateRequest, g.out, progressOut)
	if err != nil {
		made.Undo()
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "interrupted: the job on %s was cancelled; nothing kept\n", g.server)
			return errInterrupted
		}
		return err
	}
	for _, f := range files {
		made.File(f)
	}
	written := fmt.Sprintf("wrote %d images to %s", len(files), g.out)
	if grid != "none" {
		pics := make([]image.Image, 0, len(files))
		for _, f := range files {
			pic, err := readPNG(f)
			if err != nil {
				return err
			}
			pics = append(pics, pic)
		}
		if err := render.WritePNG(grid, generation.LayoutGrid(pics, job.Settings.Classes, job.Settings.ClassNames), job.Settings.Params); err != nil {
			made.Undo()
			return err
		}
		written += ", the grid to " + grid
	}
	if g.heatmap != "" {
		rates, h, w, ok := generation.WireAcceptanceRates(job.Images)
		if !ok {
			made.Undo()
			return &generation.FieldError{Field: "heatmap", Value: strconv.Quote(g.heatmap), Reason: "the server's job has no acceptance statistics"}
		}
		if err := render.WritePNG(g.heatmap, generation.HeatmapPicture(rates, h, w, job.Settings.Classes, job.Settings.ClassNames, job.Settings.Params), job.Settings.Params); err != nil {
			return err
		}
		written += ", the acceptance map to " + g.heatmap
	}
	fmt.Fprintln(os.Stderr, written)
	if g.jsonOut {
		return json.NewEncoder(os.Stdout).Encode(job)
	}
	line := fmt.Sprintf("%s mode on %s (job %s): %d images in %.2f s, seed %d", job.Settings.Mode, g.server, job.ID, len(files), job.Seconds, job.Settings.Seed)
	if job.Alpha != nil {
		line += fmt.Sprintf(", alpha %.3f", *job.Alpha)
	}
	fmt.Println(line)
	return nil
}

func readPNG(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pic, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return pic, nil
}
