package mar

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every MARSPEC_ variable the runtime packages read is in docs/gpu.md's switches section, so
// that a new switch cannot land undocumented.
func TestSwitchesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/gpu.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "## Switches")
	end := strings.Index(text, "## Where the GPU runtime comes from")
	if start < 0 || end < start {
		t.Fatal("docs/gpu.md has no switches section before \"Where the GPU runtime comes from\"")
	}
	section := text[start:end]
	name := regexp.MustCompile(`"(MARSPEC_[A-Z0-9_]+)"`)
	var files []string
	for _, dir := range []string{".", "../onnxrt"} {
		matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			seen++
			if !strings.Contains(section, "`"+m[1]) {
				t.Errorf("%s reads %s, which docs/gpu.md's switches section does not name", f, m[1])
			}
		}
	}
	if seen < 6 {
		t.Fatalf("found %d MARSPEC_ names in the runtime's source, want the switches at least", seen)
	}
}
