package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"marspec/fid"
)

func TestFIDCommand(t *testing.T) {
	imgs := t.TempDir()
	if _, stderr, code := marspec(t, nil, "generate", "--model", "draft", "--class", "all", "--n", "2", "--out", imgs); code != 0 {
		t.Fatalf("generate: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(imgs, "grid.png")); err == nil {
		t.Fatal("generate put its grid into the image folder that fid scores")
	}
	out, stderr, code := marspec(t, nil, "fid", imgs, imgs)
	if code != 0 {
		t.Fatalf("fid: %s", stderr)
	}
	fields := strings.Fields(out)
	if len(fields) < 2 || fields[0] != "FID" {
		t.Fatalf("output %q", out)
	}
	if v, err := strconv.ParseFloat(fields[1], 64); err != nil || v > 1e-6 || v < -1e-6 {
		t.Fatalf("FID of a folder with itself: %q", out)
	}
	// a README beside the images (as an earlier version's --overwrite kept) is skipped, and said
	os.WriteFile(filepath.Join(imgs, "README.txt"), []byte("notes"), 0o644)
	out, stderr, code = marspec(t, nil, "fid", imgs, imgs)
	if code != 0 || !strings.Contains(stderr, "skipped 1 files that are not PNG images (README.txt)") {
		t.Fatalf("fid with a README in the folder: exit %d, %q", code, stderr)
	}
	if !strings.Contains(out, "IS left out: "+imgs+" has 20 images, and IS needs at least") && !strings.Contains(out, "IS of "+imgs) {
		t.Fatalf("no IS line: %q", out)
	}
	stats := filepath.Join(t.TempDir(), "new", "s.npz") // -o into a folder not made yet
	if _, stderr, code := marspec(t, nil, "fid", "--stats", imgs, "-o", stats); code != 0 {
		t.Fatalf("fid --stats: %s", stderr)
	}
	few := t.TempDir()
	if _, stderr, code := marspec(t, nil, "generate", "--model", "draft", "--class", "0", "--n", "3", "--out", few); code != 0 {
		t.Fatal(stderr)
	}
	for args, want := range map[[2]string]string{
		{few, stats}:  "IS left out: " + few + " has 3 images, and IS needs at least 10 (one per split)",
		{stats, imgs}: "IS left out: " + stats + " is a statistics file",
		{imgs, stats}: "IS of " + imgs + ": ",
	} {
		out, stderr, code := marspec(t, nil, "fid", args[0], args[1])
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("fid %s %s: exit %d, out %q, stderr %q; want %q", args[0], args[1], code, out, stderr, want)
		}
	}
	small := fid.NewAccumulator(3)
	small.Add([]float64{1, 2, 3})
	small.Add([]float64{2, 2, 1})
	wrongDim := filepath.Join(t.TempDir(), "w.npz")
	if err := fid.WriteStats(wrongDim, small); err != nil {
		t.Fatal(err)
	}
	empty, junk, big := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(junk, "notes.txt"), []byte("hello"), 0o644)
	if _, stderr, code := marspec(t, nil, "generate", "--model", "draft", "--class", "0", "--out", big, "--grid", filepath.Join(big, "grid.png")); code != 0 {
		t.Fatal(stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fid", empty, stats}, "has no PNG images"},
		{[]string{"fid", junk, stats}, "has no PNG images"},
		{[]string{"fid", big, stats}, "grid.png: image is"},
		{[]string{"fid", stats, wrongDim}, "dimensions differ"},
		{[]string{"fid", imgs}, "usage: marspec fid A B"},
	} {
		_, stderr, code := marspec(t, nil, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q; want an error saying %q", c.args, code, stderr, c.want)
		}
	}
}
