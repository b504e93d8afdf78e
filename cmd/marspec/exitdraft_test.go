package main

import (
	"encoding/json"
	"strings"
	"testing"

	"marspec/generation"
)

// generate --draft exit runs with the embedded target once its pack carries the exit graphs:
// with no bound, drafts from exit passes and a verification pass cheaper than a target step,
// lossless with exact; with a bound no exit meets, every round stops drafting at once. Until
// the pack has the graphs it fails with one line that names the pack and the script.
func TestGenerateEarlyExit(t *testing.T) {
	pack, err := generation.LoadPack("target")
	if err != nil {
		t.Fatal(err)
	}
	run := func(bound string) (map[string]any, string, int) {
		t.Helper()
		out, stderr, code := marspec(t, nil, "generate", "--class", "2", "--n", "2", "--steps", "5", "--draft", "exit",
			"--exit-max-error", bound, "--acceptance", "exact", "--gamma", "3", "--json", "--out", t.TempDir())
		var s map[string]any
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatalf("--json output is not one JSON object: %v\n%s", err, out)
			}
		}
		return s, stderr, code
	}
	s, stderr, code := run("0")
	if pack.Manifest.EarlyExit == nil {
		if code == 0 || !strings.Contains(stderr, "has no early_exit entry") || !strings.Contains(stderr, "scripts/train/early_exit.py") {
			t.Fatalf("target pack without an exit: exit %d, stderr %q; want a one-line error naming scripts/train/early_exit.py", code, stderr)
		}
		t.Skip("the embedded target has no early_exit graphs yet: only the refusal was checked")
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if s["draft"] != "exit" || s["schedule"] != "batched" || s["lossless"] != true || s["exit_stops"] != 0.0 {
		t.Fatalf("exit run: %v", s)
	}
	if s["draft_forwards"].(float64) == 0 || s["drafted"].(float64) == 0 || !(s["verify_cost"].(float64) > 0 && s["verify_cost"].(float64) < 1) {
		t.Fatalf("want exit passes, drafts and a verification cost below 1: %v", s)
	}
	s, stderr, code = run("1e-9")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if s["exit_stops"].(float64) == 0 || s["drafted"].(float64) != 0 || !strings.Contains(s["params"].(string), " draft=exit ") ||
		!strings.Contains(s["params"].(string), " exit_max_error=1e-09") {
		t.Fatalf("bound 1e-9: exit stops %v, drafted %v, params %v; want every round stopped", s["exit_stops"], s["drafted"], s["params"])
	}
	if _, stderr, code := marspec(t, nil, "generate", "--draft", "exit", "--verify", "group", "--out", t.TempDir()); code == 0 || !strings.Contains(stderr, "allowed: prefix") {
		t.Fatalf("--draft exit --verify group: exit %d, %s", code, stderr)
	}
}
