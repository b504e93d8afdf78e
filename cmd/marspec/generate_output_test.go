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

// Without a terminal, progress is plain lines on stderr: the pack opening, what the run costs
// here, then the tokens inside the images with the AR step, at most one line a second, the last one the total, and
// after the first AR step what the run will take.
func TestGenerateProgressLinesWithoutATerminal(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	start := time.Now()
	// one token per AR step: 49 steps a batch, a few batches, so the run has many steps
	_, stderr, code := marspec(t, nil, "generate", "--model", "target", "--num-iter", "0", "--class", "all", "--n", "2", "--batch", "5", "--out", out)
	elapsed := time.Since(start)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "\r") || !strings.HasPrefix(stderr, "opening target (") || !strings.Contains(stderr, "\nopened target in ") {
		t.Fatalf("stderr %q: carriage returns, or no line while the pack opens", stderr)
	}
	var counts []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "generate: ") {
			counts = append(counts, line)
		}
	}
	// the first at the first step, then at most one a second, then the last
	if most := int(elapsed/time.Second) + 2; len(counts) == 0 || len(counts) > most {
		t.Fatalf("%d progress lines in %v, want 1 to %d: %q", len(counts), elapsed, most, stderr)
	}
	if !strings.Contains(counts[0], " left; AR step 1/49 of batch 1/4, 0/20 images") ||
		!strings.HasPrefix(counts[len(counts)-1], "generate: 980/980 tokens (100%)") {
		t.Errorf("first line %q, last %q: want the time left and the AR step inside the first images, and the total", counts[0], counts[len(counts)-1])
	}
	// before the run: what it costs here, and the presets estimated faster (this run is the
	// slow one-token-per-step reference)
	if !strings.Contains(stderr, "\ncost here: about ") || !strings.Contains(stderr, " per image for this run: an estimate from one unguided transformer pass (") ||
		!strings.Contains(stderr, "\n  faster: --preset fast (runs int8; estimated from the ") {
		t.Errorf("stderr %q lacks what the run costs here and the faster presets", stderr)
	}
	if !strings.Contains(stderr, "\nAR step 1/49 took ") || !strings.Contains(stderr, " for the 20 images in 4 batches (estimated from this step, the AR steps weighed by the costs timed at open)") {
		t.Errorf("stderr %q lacks the estimate after the first AR step", stderr)
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
