package main

import (
	"marspec/server/servertest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/render"
)

// generate --server runs the request on a server (here one over the analytic test models) and
// leaves the files a local run leaves: the images in --out, the grid next to it, the heatmap;
// flags only a local run takes are refused before anything is sent.
func TestGenerateOnServer(t *testing.T) {
	url := servertest.Start(t, "tok")
	dir := filepath.Join(t.TempDir(), "run")
	heat := filepath.Join(t.TempDir(), "heat.png")
	out, stderr, code := marspec(t, []string{"MARSPEC_TOKEN=tok"}, "generate", "--server", url, "--class", "trouser", "--n", "2",
		"--seed", "4", "--gamma", "2", "--heatmap", heat, "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(out, "spec mode on "+url) || !strings.Contains(out, "seed 4") || !strings.Contains(out, "alpha") {
		t.Fatalf("output %q", out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "0001_class1_trouser.png"))
	if err != nil {
		t.Fatal(err)
	}
	if p := render.ReadParameters(data); !strings.Contains(p, "gamma=2") || !strings.Contains(p, "seed=4") {
		t.Fatalf("parameters %q", p)
	}
	for _, f := range []string{dir + "-grid.png", heat} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	if out, _, _ := marspec(t, []string{"MARSPEC_TOKEN=secret-value"}, "generate", "-h"); strings.Contains(out, "secret-value") {
		t.Fatal("generate -h shows the API token")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "draft"}, "model: the server runs its own packs"},
		{[]string{"--tolerance", "0.5"}, "tolerance: the server runs its own packs"},
		{[]string{"--n", "0"}, "n 0: out of range"},
		{[]string{"--mode", "target", "--heatmap", heat}, "no acceptance map"},
		{[]string{"--cfg", "nan"}, "cfg NaN: out of range"},
		{[]string{"--class", "hat"}, `class "hat"`}, // refused by the server, naming the field
	} {
		dir := filepath.Join(t.TempDir(), "x")
		_, stderr, code := marspec(t, []string{"MARSPEC_TOKEN=tok"}, append([]string{"generate", "--server", url, "--class", "1", "--out", dir}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}

// A refused remote request leaves no --out folder behind.
func TestGenerateRemoteRefusedLeavesNothing(t *testing.T) {
	url := servertest.Start(t, "tok")
	fresh := filepath.Join(t.TempDir(), "new", "run")
	_, stderr, code := marspec(t, []string{"MARSPEC_TOKEN=tok"}, "generate", "--server", url, "--class", "dragon", "--out", fresh)
	if code == 0 || !strings.Contains(stderr, `class "dragon"`) {
		t.Errorf("remote 400: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
		t.Errorf("a refused remote request left %s behind", filepath.Dir(fresh))
	}
}
