// Package servertest starts a marspec service on the analytic test models, for the tests of
// packages that are its clients.
package servertest

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"marspec/generation"
	"marspec/server"
	"marspec/store"
)

// Start serves the analytic test models (generation.TestModels) on a loopback address until
// the test ends and returns its URL; token, when set, guards POST and DELETE.
func Start(t testing.TB, token string) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Token, cfg.Drain = token, 0
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	models, cat := generation.TestModels()
	srv := server.New(cfg, server.Deps{Catalog: cat, Models: models, Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()); hs.Close(); st.Close() })
	return hs.URL
}
