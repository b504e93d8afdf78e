package remote

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/api"
	"marspec/generation"
	"marspec/render"
	"marspec/server/servertest"
)

func TestGenerateRemoteWritesTheServersImages(t *testing.T) {
	url := servertest.Start(t, "tok")
	out := t.TempDir()
	seed := uint64(12)
	req := api.GenerateRequest{Class: api.Classes{"trouser", "2"}, N: 2, Seed: &seed, Mode: "spec"}
	var progress bytes.Buffer
	g, files, err := Generate(t.Context(), url, "tok", req, out, &progress)
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
	// plain lines in a buffer, the last one every token of the 4 images
	if !strings.Contains(progress.String(), " tokens (100%)") || !strings.Contains(progress.String(), "; 4/4 images\n") ||
		strings.Contains(progress.String(), "\r") {
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
	url := servertest.Start(t, "tok")
	req := api.GenerateRequest{Class: api.Classes{"dragon"}}
	if _, _, err := Generate(t.Context(), url, "tok", req, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "class") {
		t.Errorf("unknown class: %v", err)
	}
	req = api.GenerateRequest{Class: api.Classes{"0"}}
	if _, _, err := Generate(t.Context(), url, "wrong", req, t.TempDir(), nil); !api.IsStatus(err, 401) {
		t.Errorf("wrong token: %v", err)
	}
	if _, _, err := Generate(t.Context(), "ftp://x", "", req, t.TempDir(), nil); generation.Field(err) != "server" {
		t.Errorf("bad URL: %v", err)
	}

}

// The grid and the acceptance map of a remote job are drawn from its downloaded images; a
// job without speculative statistics has no map, and says so.
func TestDrawPictures(t *testing.T) {
	url := servertest.Start(t, "")
	out := t.TempDir()
	g, files, err := Generate(t.Context(), url, "", api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Mode: "spec"}, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	grid, heat := filepath.Join(t.TempDir(), "grid.png"), filepath.Join(t.TempDir(), "heat.png")
	if err := DrawPictures(g, files, grid, heat); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{grid, heat} {
		data, err := os.ReadFile(f)
		if err != nil || render.ReadParameters(data) != g.Settings.Params {
			t.Errorf("%s: %v, parameters %q", f, err, render.ReadParameters(data))
		}
	}
	target, files, err := Generate(t.Context(), url, "", api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "target"}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := DrawPictures(target, files, "", heat); generation.Field(err) != "heatmap" {
		t.Errorf("heatmap of a target-only job: %v", err)
	}
}
