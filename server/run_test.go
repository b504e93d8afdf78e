package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/store"
)

// ServeUntilDone serves until its context ends, then shuts down cleanly: a job accepted
// before stays in the store, finished or resumable.
func TestServeUntilDoneShutsDownCleanly(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Drain = time.Minute
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	models, cat := generation.TestModels()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(cfg, Deps{Catalog: cat, Models: models, Store: st, Log: log})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeUntilDone(ctx, ln, log) }()
	c, _ := api.NewClient("http://"+ln.Addr().String(), "", nil)
	g, err := c.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}, N: 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	stop() // as SIGINT does
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	j, err := st.Job(g.ID)
	if err != nil || j.Status != api.StatusSucceeded {
		t.Fatalf("the job accepted before the shutdown: %+v %v (a minute's drain lets it finish)", j, err)
	}
	if _, err := c.Models(t.Context()); err == nil {
		t.Error("still answering after shutdown")
	}
}
