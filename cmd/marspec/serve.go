package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"marspec/generation"
	"marspec/onnxrt"
	"marspec/server"
	"marspec/store"
	"marspec/web"
)

// runServe serves the REST API (docs/api.md) and the gallery at http://ADDR/. Every setting
// is a flag and a MARSPEC_* environment variable (the flag wins). SIGINT or SIGTERM stops
// taking jobs, lets running ones finish for --drain, and leaves the rest in the data folder
// to resume on the next start.
func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var cfg server.Config
	envErr := cfg.Bind(fs) // every flag's help names its MARSPEC_* variable
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if envErr != nil {
		return envErr
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	// the port first: a taken or refused --addr stops serve before the packs are opened or
	// the data folder is made
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", cfg.Addr, err)
	}
	defer ln.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv, st, err := openServer(cfg, ortModels(cfg), log)
	if err != nil {
		return err
	}
	defer st.Close()
	resumed, failed, err := srv.Resume()
	if err != nil {
		return fmt.Errorf("resuming jobs: %w", err)
	}
	if resumed+failed > 0 {
		log.Info("jobs left by the last run", "resumed", resumed, "failed", failed)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveUntilDone(ctx, srv, ln, log)
}

// openServer opens the model packs (the target and, unless --draft is empty, the draft) with
// models and the data folder, and builds the server over them.
func openServer(cfg server.Config, models generation.Models, log *slog.Logger) (*server.Server, *store.Store, error) {
	dev, err := onnxrt.ParseDevice(cfg.Device)
	if err != nil {
		return nil, nil, err
	}
	cat, err := generation.CatalogFor(models, cfg.Target, cfg.Draft, dev.Provider(), cfg.MaxImages)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the model packs: %w", err)
	}
	st, err := server.OpenStore(cfg)
	if err != nil {
		return nil, nil, err
	}
	srv := server.New(cfg, server.Deps{Catalog: cat, Models: models, Store: st, UI: web.FS, Log: log})
	return srv, st, nil
}

// ortModels opens packs with ONNX Runtime as cfg says.
func ortModels(cfg server.Config) *generation.ORTModels {
	return &generation.ORTModels{ORTLib: cfg.ORTLib, Provider: cfg.Device, Threads: cfg.Threads}
}

// serveUntilDone serves on ln until ctx ends (a signal), then shuts down: the scheduler drains
// and stops first (event streams end, ?wait answers return), then the HTTP server.
func serveUntilDone(ctx context.Context, srv *server.Server, ln net.Listener, log *slog.Logger) error {
	hs := srv.HTTPServer()
	failed := make(chan error, 1)
	go func() { failed <- hs.Serve(ln) }()
	log.Info("serving", "url", "http://"+ln.Addr().String())
	select {
	case err := <-failed:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: no new jobs; running ones get the drain time")
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serr := srv.Shutdown(sctx)
	herr := hs.Shutdown(sctx)
	if errors.Is(herr, http.ErrServerClosed) {
		herr = nil
	}
	return errors.Join(serr, herr)
}
