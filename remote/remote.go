// Package remote runs a generation on a marspec server for a client that wants the images in
// a folder (`marspec generate --server`): submit, follow the events, download each PNG under
// the name a local run gives it.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/mar"
	"marspec/progress"
)

// Generate runs req on the marspec server at serverURL (`generate --server URL`): it
// submits the request (waiting out a full queue as the server's Retry-After asks, a few
// times), follows the job's events with a progress line on progress (nil: quiet), and
// writes every image into out under the names a local run gives (NNNN_classC_slug.png), each
// PNG as the server made it, its parameters inside. out must exist and be prepared by the
// caller (generation.PrepareFolder). If ctx ends first, the remote job is cancelled. It
// returns the finished job (its settings hold the seed used) and the files written.
func Generate(ctx context.Context, serverURL, token string, req api.GenerateRequest, out string, progress io.Writer) (*api.Generation, []string, error) {
	c, err := api.NewClient(serverURL, token, nil)
	if err != nil {
		return nil, nil, &generation.FieldError{Field: "server", Value: serverURL, Allowed: "http://HOST:PORT", Reason: err.Error()}
	}
	g, err := submitWithRetry(ctx, c, req, 5)
	if err != nil {
		return nil, nil, ExplainUnreachable(serverURL, err)
	}
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "job %s on %s: %d images, seed %d\n", g.ID, serverURL, len(g.Settings.Classes), g.Settings.Seed)
	final, err := followJob(ctx, c, g.ID, progress)
	if err != nil {
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = c.Delete(cctx, g.ID) // do not leave the server working for nobody
			cancel()
		}
		return nil, nil, err
	}
	if final.Status != api.StatusSucceeded {
		return final, nil, fmt.Errorf("job %s %s: %s", final.ID, final.Status, final.Error)
	}
	names := generation.Plan{ClassNames: final.Settings.ClassNames}
	var files []string
	for _, im := range final.Images {
		data, err := c.Image(ctx, im.URL)
		if err != nil {
			return final, files, fmt.Errorf("downloading image %d: %w", im.Index, err)
		}
		if im.Index < 0 || im.Index >= len(final.Settings.ClassNames) {
			return final, files, fmt.Errorf("image %d: index out of the job's %d images", im.Index, len(final.Settings.ClassNames))
		}
		path := filepath.Join(out, names.FileName(generation.Image{Index: im.Index, Class: im.Class}))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return final, files, err
		}
		files = append(files, path)
	}
	return final, files, nil
}

// submitWithRetry posts req, retrying up to tries times while the server answers 503.
func submitWithRetry(ctx context.Context, c *api.Client, req api.GenerateRequest, tries int) (*api.Generation, error) {
	for attempt := 1; ; attempt++ {
		g, err := c.Generate(ctx, req, 0)
		var apiErr *api.Error
		if err == nil || !errors.As(err, &apiErr) || apiErr.Status != 503 || attempt == tries {
			return g, err
		}
		wait := max(apiErr.RetryAfter, time.Second)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// followJob follows the job's events to its end, showing its tokens as the server counts them
// (inside its images: progress.Reporter, a bar on a terminal, a line at most every second
// otherwise); if the stream breaks (a restarting server) it polls instead.
func followJob(ctx context.Context, c *api.Client, id string, out io.Writer) (*api.Generation, error) {
	var bar *progress.Reporter
	show := func(p api.Progress) {
		if bar == nil {
			bar = progress.New(out, "job "+id, "tokens", p.TokensTotal, progress.Options{})
		}
		bar.Set(p.TokensDone, fmt.Sprintf("%d/%d images", p.ImagesDone, p.ImagesTotal))
	}
	defer func() { bar.Done() }()
	final, err := c.Events(ctx, id, func(ev api.Event) error {
		switch {
		case ev.Progress != nil:
			show(*ev.Progress)
		case ev.Generation != nil:
			show(ev.Generation.Progress)
		}
		return nil
	})
	if err == nil {
		return final, nil
	}
	var apiErr *api.Error
	if ctx.Err() != nil || errors.As(err, &apiErr) {
		return nil, err
	}
	if bar != nil {
		bar.Println(fmt.Sprintf("event stream lost (%v); polling", err))
	} else {
		fmt.Fprintf(out, "event stream lost (%v); polling\n", err)
	}
	for {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		g, err := c.Generation(ctx, id)
		if err != nil {
			if errors.As(err, &apiErr) && apiErr.Status != 503 {
				return nil, err
			}
			continue // the server is restarting
		}
		show(g.Progress)
		if g.Ended() {
			return g, nil
		}
	}
}

// ExplainUnreachable turns a failure to connect into a sentence naming the address and what
// must be running there; other errors (the server's own answers) pass unchanged.
func ExplainUnreachable(serverURL string, err error) error {
	var opErr *net.OpError
	if !errors.As(err, &opErr) || opErr.Op != "dial" {
		return err
	}
	reason := opErr.Err.Error()
	var sysErr *os.SyscallError
	if errors.As(opErr.Err, &sysErr) {
		reason = sysErr.Err.Error()
	}
	return fmt.Errorf("cannot reach a marspec server at %s (%s): `marspec serve` must be running there (make run starts one at http://127.0.0.1:8080), or fix --server", serverURL, reason)
}

// Settings are the presets and default preset of the pack a server runs (its GET
// /v1/models), and that pack's name: what a client resolves a request's mode against before
// sending it (generation.ResolveMode), since presets belong to the server's pack.
func Settings(ctx context.Context, serverURL, token string) (*mar.Settings, string, error) {
	c, err := api.NewClient(serverURL, token, nil)
	if err != nil {
		return nil, "", &generation.FieldError{Field: "server", Value: serverURL, Allowed: "http://HOST:PORT", Reason: err.Error()}
	}
	m, err := c.Models(ctx)
	if err != nil {
		return nil, "", ExplainUnreachable(serverURL, err)
	}
	return generation.SettingsFromWire(m), m.PresetsOf, nil
}
