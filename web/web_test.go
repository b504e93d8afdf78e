package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(FS, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatalf("%s is empty", name)
	}
	return string(b)
}

// TestNoNetwork: the gallery must work offline, so no file may load anything from another
// origin (CDN scripts, web fonts, remote images).
func TestNoNetwork(t *testing.T) {
	remote := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(\s*['"]?https?:`)
	files, err := fs.Glob(FS, "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for i, line := range strings.Split(read(t, f), "\n") {
			if remote.MatchString(line) {
				t.Errorf("%s:%d refers to another origin: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestReferencesResolve: every file index.html loads is embedded, and every element id the
// scripts look up exists in index.html (a renamed id would otherwise fail only in a browser).
func TestReferencesResolve(t *testing.T) {
	index := read(t, "index.html")
	for _, m := range regexp.MustCompile(`(?:src|href)="ui/([^"]+)"`).FindAllStringSubmatch(index, -1) {
		if _, err := fs.Stat(FS, m[1]); err != nil {
			t.Errorf("index.html loads ui/%s, which is not embedded", m[1])
		}
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bid="([^"]+)"`).FindAllStringSubmatch(index, -1) {
		ids[m[1]] = true
	}
	scripts, _ := fs.Glob(FS, "*.js")
	if len(scripts) == 0 {
		t.Fatal("no scripts embedded")
	}
	lookup := regexp.MustCompile(`\$\("#([A-Za-z0-9_-]+)"\)`)
	created := regexp.MustCompile(`\bid: "([A-Za-z0-9_-]+)"`) // ids the scripts create themselves
	for _, f := range scripts {
		src := read(t, f)
		for _, m := range created.FindAllStringSubmatch(src, -1) {
			ids[m[1]] = true
		}
	}
	for _, f := range scripts {
		for _, m := range lookup.FindAllStringSubmatch(read(t, f), -1) {
			if !ids[m[1]] {
				t.Errorf("%s looks up #%s, which index.html does not have", f, m[1])
			}
		}
	}
}
