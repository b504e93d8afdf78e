package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"marspec/generation"
	"marspec/mar"
	"marspec/onnxrt"
	"marspec/store"
)

// Open opens the model packs (the target and, unless cfg.Draft is empty, the draft) with
// models and the store cfg names, and builds the server over them with the gallery ui.
func Open(cfg Config, models generation.Models, ui fs.FS, log *slog.Logger) (*Server, *store.Store, error) {
	dev, err := onnxrt.ParseDevice(cfg.Device)
	if err != nil {
		return nil, nil, err
	}
	precision, err := mar.ParsePrecision(cfg.Precision) // before any pack is read
	if err != nil {
		return nil, nil, fmt.Errorf("--precision: %w", err)
	}
	if err := mar.CheckPrecisionProvider(precision, dev.Provider()); err != nil {
		return nil, nil, fmt.Errorf("--precision: %w", err)
	}
	allowed, err := generation.ParsePrecisions(cfg.Precisions, precision)
	if err != nil {
		return nil, nil, fmt.Errorf("--precisions: %w", err)
	}
	cat, err := generation.CatalogFor(models, cfg.Target, cfg.Draft, dev.Provider(), precision, cfg.MaxImages)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the model packs: %w", err)
	}
	cat.Precisions = allowed
	st, err := OpenStore(cfg)
	if err != nil {
		return nil, nil, err
	}
	srv := New(cfg, Deps{Catalog: cat, Models: models, Store: st, UI: ui, Log: log})
	return srv, st, nil
}

// ServeUntilDone serves on ln until ctx ends (a signal), then shuts down: the scheduler drains
// and stops first (event streams end, ?wait answers return), then the HTTP server.
func (srv *Server) ServeUntilDone(ctx context.Context, ln net.Listener, log *slog.Logger) error {
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
