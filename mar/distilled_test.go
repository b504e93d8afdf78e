package mar

import (
	"encoding/json"
	"strings"
	"testing"
)

// The distilled_head entry is checked when the manifest is read: format, file name, what it
// predicts, cfg_max, and times that match each step count and decrease within the schedule.
func TestDistilledHeadEntry(t *testing.T) {
	good := func() map[string]any {
		return map[string]any{"file": "distilled_head.onnx", "format": DistilledHeadFormat, "steps": []int{1, 2},
			"times": map[string][]int{"1": {999}, "2": {999, 500}}, "cfg_max": 4, "predicts": "x0"}
	}
	m := targetManifestJSON(t)
	m["distilled_head"] = good()
	data, _ := json.Marshal(m)
	if _, err := ParseManifest(data, "p/manifest.json"); err != nil {
		t.Fatalf("good entry rejected: %v", err)
	}
	for _, c := range []struct {
		key  string
		val  any
		want string
	}{
		{"format", "marspec-distilled-head/9", `distilled_head format "marspec-distilled-head/9" unsupported`},
		{"file", "../d.onnx", `distilled_head file "../d.onnx"`},
		{"predicts", "eps", `distilled_head predicts "eps" unsupported`},
		{"cfg_max", 0.5, "cfg_max 0.5 must be at least 1"},
		{"steps", []int{}, "steps is missing or empty"},
		{"steps", []int{1, 4}, "times for 4 steps: [], want 4"},
		{"times", map[string][]int{"1": {999}, "2": {500, 999}}, "want decreasing timesteps in 0 to 999"},
		{"times", map[string][]int{"1": {1000}, "2": {999, 500}}, "want decreasing timesteps in 0 to 999"},
	} {
		e := good()
		e[c.key] = c.val
		m["distilled_head"] = e
		data, _ := json.Marshal(m)
		if _, err := ParseManifest(data, "p/manifest.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%v: error %v, want one containing %q", c.key, c.val, err, c.want)
		}
	}
}
