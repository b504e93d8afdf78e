package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/api"
	"marspec/generation"
	"marspec/render"
	"marspec/server"
	"marspec/store"
)

// remoteTestServer serves the analytic test models.
func remoteTestServer(t *testing.T, token string) string {
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

func TestGenerateRemoteWritesTheServersImages(t *testing.T) {
	url := remoteTestServer(t, "tok")
	out := t.TempDir()
	seed := uint64(12)
	req := api.GenerateRequest{Class: api.Classes{"trouser", "2"}, N: 2, Seed: &seed, Mode: "spec"}
	var progress bytes.Buffer
	g, files, err := generateRemote(t.Context(), url, "tok", req, out, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != api.StatusSucceeded || g.Settings.Seed != 12 || len(files) != 4 {
		t.Fatalf("job %+v, files %v", g, files)
	}
	want := []string{"0000_class1_trouser.png", "0001_class1_trouser.png", "0002_class2_pullover.png", "0003_class2_pullover.png"}
	for i, f := range files {
		if filepath.Base(f) != want[i] {
			t.Errorf("file %d is %s, want %s", i, filepath.Base(f), want[i])
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if p := render.ReadParameters(data); !strings.Contains(p, "seed=12") || !strings.Contains(p, "mode=spec") {
			t.Errorf("%s parameters %q", f, p)
		}
	}
	if !strings.Contains(progress.String(), "4/4 images") {
		t.Errorf("progress output %q", progress.String())
	}
	// The same request run locally makes the same pixels.
	models, cat := generation.TestModels()
	plan, err := generation.Validate(req, cat)
	if err != nil {
		t.Fatal(err)
	}
	local, err := generation.Run(t.Context(), plan, models, 0)
	if err != nil {
		t.Fatal(err)
	}
	png, _ := plan.PNG(local[3])
	remote, _ := os.ReadFile(files[3])
	if !bytes.Equal(png, remote) {
		t.Error("the remote image differs from the local one")
	}
}

func TestGenerateRemoteErrors(t *testing.T) {
	url := remoteTestServer(t, "tok")
	req := api.GenerateRequest{Class: api.Classes{"dragon"}}
	if _, _, err := generateRemote(t.Context(), url, "tok", req, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "class") {
		t.Errorf("unknown class: %v", err)
	}
	req = api.GenerateRequest{Class: api.Classes{"0"}}
	if _, _, err := generateRemote(t.Context(), url, "wrong", req, t.TempDir(), nil); !api.IsStatus(err, 401) {
		t.Errorf("wrong token: %v", err)
	}
	if _, _, err := generateRemote(t.Context(), "ftp://x", "", req, t.TempDir(), nil); generation.Field(err) != "server" {
		t.Errorf("bad URL: %v", err)
	}
	// through the command: a refused remote request leaves no --out folder behind
	fresh := filepath.Join(t.TempDir(), "new", "run")
	_, stderr, code := marspec(t, []string{"MARSPEC_TOKEN=tok"}, "generate", "--server", url, "--class", "dragon", "--out", fresh)
	if code == 0 || !strings.Contains(stderr, `class "dragon"`) {
		t.Errorf("remote 400: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
		t.Errorf("a refused remote request left %s behind", filepath.Dir(fresh))
	}
}
