package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"marspec/generation"
	"marspec/server"
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
	srv, st, err := server.Open(cfg, ortModels(cfg), web.FS, log)
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
	return srv.ServeUntilDone(ctx, ln, log)
}

// ortModels opens packs with ONNX Runtime as cfg says.
func ortModels(cfg server.Config) *generation.ORTModels {
	return &generation.ORTModels{ORTLib: cfg.ORTLib, Provider: cfg.Device, Threads: cfg.Threads, Tuning: cfg.ORTTuning,
		PrepareImages: cfg.MaxBatch}
}
