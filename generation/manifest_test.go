package generation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/models"
)

// A request reads only its packs' manifests: a folder whose graphs are not there yet still
// resolves its request (the graphs are read when the pack opens, and fail then), a missing
// folder is named, and the embedded packs resolve by name.
func TestRequestReadsOnlyManifests(t *testing.T) {
	dir := t.TempDir()
	data, err := models.FS.ReadFile("target/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	g := GenerateSettings{Target: dir, Draft: "draft", Class: "1", N: 1, MaxImages: 10, Provider: "cpu"}
	_, cat, err := g.Request(map[string]bool{}, true)
	if err != nil || cat.Target == nil || cat.Target.Name != "fmnist-target" {
		t.Fatalf("request on a manifest alone: %v", err)
	}
	if _, err := LoadPack(dir); err == nil || !strings.Contains(err.Error(), "cannot read") {
		t.Errorf("the pack itself has no graphs: %v", err)
	}
	if _, err := LoadManifest(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope: no such folder") {
		t.Errorf("missing folder: %v", err)
	}
	if m, err := LoadManifest("draft"); err != nil || m.Name != "fmnist-draft" {
		t.Errorf("embedded draft: %v", err)
	}
}
