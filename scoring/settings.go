package scoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// Settings fix a scoring run; a resumed run must use the same ones (run.json pins them).
type Settings struct {
	N           int      `json:"n"`
	Seed        uint64   `json:"seed"`
	Batch       int      `json:"batch"`
	Chunk       int      `json:"chunk"`
	CFG         float64  `json:"cfg"`
	Temperature float64  `json:"temperature"`
	Steps       int      `json:"steps"`
	Target      string   `json:"target"`
	Draft       string   `json:"draft"`
	Configs     []string `json:"configs"`
	// Precision of the packs' transformer and head graphs: "" for fp32 (so runs made before
	// there was a choice resume as they were) or "int8"; the models given to Open must be
	// opened at it (the CLI's --precision does both).
	Precision string `json:"precision,omitempty"`
	// CFGSchedule is the guidance schedule of every configuration: "" for the pack's default
	// (runs made before it was a setting), or linear or constant (eval --protocol pins it).
	CFGSchedule string `json:"cfg_schedule,omitempty"`
	// Protocol and Preset name the published evaluation the run reproduces and the pack's
	// preset it took its settings from (eval --protocol; "" for other runs).
	Protocol string `json:"protocol,omitempty"`
	Preset   string `json:"preset,omitempty"`
}

// DefaultConfigs are eval's configurations when none are given: the paper's Table 3.
const DefaultConfigs = "target,draft,spec,spec:acceptance=exact,spec:verify=group,spec:verify=group:acceptance=exact"

// Chunks is how many chunks the run's images make.
func (s Settings) Chunks() int { return (s.N + s.Chunk - 1) / s.Chunk }

// ParseShard reads i/n: a process making only the chunks c with c mod n == i.
func ParseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("shard %q: want i/n with 0 <= i < n", s)
	}
	return i, n, nil
}

// checkRunSettings writes run.json for a new run, or refuses to resume one made otherwise.
func checkRunSettings[T any](dir string, s T) error {
	path := filepath.Join(dir, "run.json")
	data, err := os.ReadFile(path)
	if err == nil {
		var old T
		if err := json.Unmarshal(data, &old); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		if !reflect.DeepEqual(old, s) {
			return fmt.Errorf("%s holds a run made with other settings: %s; resume it with the run's settings, or use another --out", path, settingsDiff(old, s))
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, _ = json.MarshalIndent(s, "", "  ")
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// settingsDiff names each setting that differs between a run on disk and this command, as
// "--name: the run has A, this command B", in the settings' order.
func settingsDiff[T any](old, cur T) string {
	a, b := settingsFields(old), settingsFields(cur)
	var diffs []string
	for _, f := range b {
		if v, ok := findField(a, f.name); !ok || v != f.value {
			if !ok {
				v = "nothing"
			}
			diffs = append(diffs, fmt.Sprintf("--%s: the run has %s, this command %s", strings.ReplaceAll(f.name, "_", "-"), v, f.value))
		}
	}
	if len(diffs) == 0 {
		return "settings the flags do not show"
	}
	return strings.Join(diffs, "; ")
}

type settingsField struct{ name, value string }

// settingsFields lists a settings struct's JSON fields in order, each value as JSON.
func settingsFields(s any) []settingsField {
	v := reflect.ValueOf(s)
	var out []settingsField
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(v.Field(i))
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			data, _ := json.Marshal(v.Field(i).Interface())
			out = append(out, settingsField{name, string(data)})
		}
	}
	walk(v)
	return out
}

func findField(fields []settingsField, name string) (string, bool) {
	for _, f := range fields {
		if f.name == name {
			return f.value, true
		}
	}
	return "", false
}
