package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"marspec/api"
	"marspec/generation"
	"marspec/remote"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) // Ctrl-C cancels the job there
	defer stop()
	token := g.token
	if token == "" {
		token = os.Getenv("MARSPEC_TOKEN")
	}
	mode, err := remoteMode(ctx, g.server, token, req)
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
	if grid == "none" {
		grid = ""
	}
	if err := remote.DrawPictures(job, files, grid, g.heatmap); err != nil {
		made.Undo()
		return err
	}
	if grid != "" {
		written += ", the grid to " + grid
	}
	if g.heatmap != "" {
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

// remoteMode is the mode a server will run req in, resolved against the presets of the pack it
// runs (its GET /v1/models): presets belong to the pack, not to this binary.
func remoteMode(ctx context.Context, server, token string, req generation.Request) (string, error) {
	c, err := api.NewClient(server, token, nil)
	if err != nil {
		return "", err
	}
	m, err := c.Models(ctx)
	if err != nil {
		return "", remote.ExplainUnreachable(server, err)
	}
	mode, _, _, err := generation.ResolveMode(req, generation.SettingsFromWire(m), m.PresetsOf)
	return mode, err
}
