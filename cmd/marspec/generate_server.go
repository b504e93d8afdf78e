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
	if g.N < 1 { // the wire reads n 0 as "the default"
		return &generation.FieldError{Field: "n", Value: strconv.Itoa(g.N), Allowed: "at least 1 image per class"}
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
	settings, pack, err := remote.Settings(ctx, g.server, token)
	if err != nil {
		return err
	}
	mode, _, _, err := generation.ResolveMode(req, settings, pack)
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
	if grid == "none" {
		grid = ""
	}
	if err := remote.DrawPictures(job, files, grid, g.heatmap); err != nil {
		made.Undo()
		return err
	}
	fmt.Fprintln(os.Stderr, generation.WroteSummary(len(files), g.out, grid, g.heatmap))
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
