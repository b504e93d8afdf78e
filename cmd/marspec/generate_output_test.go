package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's quick start on a fresh clone: --out, --grid and --heatmap in folders that do
// not exist yet are made, as a CLI user expects.
func TestGenerateMakesMissingFolders(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "out", "demo")
	heat := filepath.Join(root, "maps", "deep", "heat.png")
	_, stderr, code := marspec(t, nil, "generate", "--mode", "spec", "--class", "0,1", "--n", "1", "--seed", "1", "--out", out, "--heatmap", heat, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, f := range []string{filepath.Join(root, "out", "demo-grid.png"), heat, filepath.Join(out, "0000_class0_t-shirt-top.png")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if strings.Contains(stderr, "generate:") {
		t.Errorf("--quiet still showed progress: %q", stderr)
	}
}

// Without a terminal, progress is plain lines on stderr, the last one the total.
func TestGenerateProgressLinesWithoutATerminal(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	_, stderr, code := marspec(t, nil, "generate", "--class", "all", "--n", "1", "--batch", "5", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "generate: 10/10 images (100%)") || strings.Contains(stderr, "\r") {
		t.Fatalf("stderr %q lacks the plain final progress line", stderr)
	}
}

// Ctrl-C midway keeps the images already finished and their grid, says so, and exits 130.
func TestGenerateInterruptKeepsFinishedImages(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "run")
	// one token per step, 2 images a batch: each batch takes a moment, so the run is midway
	cmd := exec.Command(os.Args[0], "generate", "--model", "target", "--num-iter", "0", "--class", "all", "--n", "20", "--batch", "2", "--threads", "1", "--out", out)
	cmd.Env = append(os.Environ(), "MARSPEC_RUN_MAIN=1", "MARSPEC_ORT_LIB="+ortLib(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if files, _ := filepath.Glob(filepath.Join(out, "*.png")); len(files) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no image after 2 minutes: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130; stderr %s", err, stderr.String())
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.png"))
	if len(files) < 2 || len(files) >= 200 {
		t.Fatalf("kept %d images, want some of 200", len(files))
	}
	if !strings.Contains(stderr.String(), "interrupted: kept the ") || !strings.Contains(stderr.String(), "of 200 images finished") {
		t.Fatalf("stderr %q does not say what was kept", stderr.String())
	}
	if _, err := os.Stat(out + "-grid.png"); err != nil {
		t.Fatalf("no grid of the kept images: %v", err)
	}
}
