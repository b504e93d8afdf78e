package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/server"
	"marspec/web"
)

// startServer serves the target and draft packs (the embedded ones unless tweak names others;
// ONNX Runtime, CPU, one thread) from a temporary data folder on a loopback httptest server.
// The server is shut down, then the listener closed, when the test ends. tweak, when not nil,
// changes the settings first.
func startServer(t *testing.T, tweak func(*server.Config)) *httptest.Server {
	t.Helper()
	lib, err := filepath.Abs("../third_party/onnxruntime/libonnxruntime.so")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("ONNX Runtime library missing (%v): run `make setup`", err)
	}
	var cfg server.Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	if err := cfg.Bind(fs); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	if tweak != nil {
		tweak(&cfg)
	}
	models := &generation.ORTModels{ORTLib: lib, Provider: "cpu", Threads: 1}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, st, err := server.Open(cfg, models, web.FS, log) // as marspec serve starts: flags checked, packs and store opened
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ts.Close()
		if err := st.Close(); err != nil {
			t.Errorf("store: %v", err)
		}
	})
	return ts
}

// testWriter sends the server's warnings and errors to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// getGeneration reads a job through the API, as the page does.
func getGeneration(t *testing.T, base, id string) api.Generation {
	t.Helper()
	res, err := http.Get(base + "/v1/generations/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET generation %s: %s", id, res.Status)
	}
	var g api.Generation
	if err := json.NewDecoder(res.Body).Decode(&g); err != nil {
		t.Fatal(err)
	}
	return g
}
