package server

import (
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"marspec/generation"
)

// readDoc reads a file of the repository's docs (the tests run in server/).
func readDoc(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile("../" + path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(data)), " ") // line breaks as spaces
}

// Where the docs state a default, it is the code's: the embedded pack's default preset and
// presets, and the serve settings' defaults, so a change to the code that forgets the docs fails here.
func TestDocsStateTheCodesDefaults(t *testing.T) {
	defaultPreset := regexp.MustCompile("default preset, `([a-z]+)`")
	for _, doc := range []string{"README.md", "docs/api.md", "docs/gallery.md"} {
		text := readDoc(t, doc)
		found := defaultPreset.FindAllStringSubmatch(text, -1)
		if len(found) == 0 {
			t.Errorf("%s does not state the default preset as \"default preset, `NAME`\"", doc)
		}
		for _, m := range found {
			if def := generation.EmbeddedSettings().DefaultPreset; m[1] != def {
				t.Errorf("%s says the default preset is %s; the embedded pack's is %s", doc, m[1], def)
			}
		}
		if strings.Contains(text, "`spec` (default)") || strings.Contains(text, "the default: speculative") {
			t.Errorf("%s still calls speculative decoding the default", doc)
		}
	}
	presets := "`" + strings.Join(generation.EmbeddedSettings().PresetNames(), "`, `") + "`"
	for _, doc := range []string{"docs/api.md", "docs/gallery.md"} {
		if !strings.Contains(readDoc(t, doc), presets) {
			t.Errorf("%s does not list the presets as %s", doc, presets)
		}
	}

	// "`--name` (value)" in api.md's Settings against the flags' defaults
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var c Config
	if err := c.bind(fs, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	text := readDoc(t, "docs/api.md")
	stated := regexp.MustCompile("`--([a-z-]+)` \\(([^)]*)\\)").FindAllStringSubmatch(text, -1)
	checked := map[string]bool{}
	for _, m := range stated {
		f := fs.Lookup(m[1])
		if f == nil {
			t.Errorf("docs/api.md names --%s, which serve does not have", m[1])
			continue
		}
		got := docValue(m[2])
		checked[m[1]] = true
		if got != f.DefValue {
			t.Errorf("docs/api.md says --%s defaults to %q; serve's default is %q", m[1], m[2], f.DefValue)
		}
	}
	for _, name := range []string{"addr", "queue", "max-batch", "max-images", "max-wait", "body-limit"} {
		if !checked[name] {
			t.Errorf("docs/api.md does not state --%s's default as \"`--%s` (VALUE)\"", name, name)
		}
	}
}

// docValue reads the value a doc states first in parentheses: "65536" from "64 KiB", "" from
// "empty", "draft" from "`draft`; empty: ...".
func docValue(s string) string {
	first, rest, _ := strings.Cut(s, " ")
	first = strings.Trim(first, "`,;:")
	if n, err := strconv.Atoi(first); err == nil && strings.HasPrefix(rest, "KiB") {
		return strconv.Itoa(n * 1024)
	}
	if first == "empty" {
		return ""
	}
	return first
}
