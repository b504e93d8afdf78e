package scoring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeReport makes a finished run folder with the given rows.
func writeReport(t *testing.T, s Settings, rows []configResult) string {
	t.Helper()
	dir := t.TempDir()
	data, err := json.Marshal(map[string]any{"settings": s, "results": rows})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func f64(x float64) *float64 { return &x }

// Three seeds of target and spec at CFG 1, one seed of draft, one seed at CFG 3: the table has
// one section per scale, mean ± sample std where seeds repeat (FID 10, 12, 14 -> 12.00 ± 2.00).
func TestTableMeanStd(t *testing.T) {
	var dirs []string
	for i, seed := range []uint64{3, 1, 2} {
		rows := []configResult{
			{Name: "target", Description: "target-only", FID: 10 + 2*float64(seed-1), ISMean: 7, ClassAccuracy: 0.8, SecondsImage: 0.1},
			{Name: "spec", Description: "spec gamma=8", FID: 11, ISMean: 6 + float64(i), ClassAccuracy: 0.9, Alpha: f64(0.2), SecondsImage: 0.2, Speedup: f64(0.5)},
		}
		if seed == 1 {
			rows = append(rows, configResult{Name: "draft", Description: "draft-only", FID: 30, ISMean: 5, ClassAccuracy: 0.5, SecondsImage: 0.03, Speedup: f64(3)})
		}
		dirs = append(dirs, writeReport(t, Settings{N: 2000, Seed: seed, CFG: 1, Temperature: 1}, rows))
	}
	dirs = append(dirs, writeReport(t, Settings{N: 2000, Seed: 1, CFG: 3, Temperature: 1},
		[]configResult{{Name: "target", Description: "target-only", FID: 20, ISMean: 8, ClassAccuracy: 0.95, SecondsImage: 0.2}}))
	out, err := Table(dirs)
	if err != nil {
		t.Fatalf("table: %v", err)
	}
	for _, want := range []string{
		"### CFG off (scale 1) — N = 2000",
		"| target-only | 1,2,3 | 12.00 ± 2.00 | 7.00 ± 0.00 | 0.800 ± 0.000 | – |",
		"| spec gamma=8 | 1,2,3 | 11.00 ± 0.00 | 7.00 ± 1.00 | 0.900 ± 0.000 | 0.200 ± 0.000 | 0.200 ± 0.000 | 0.50x ± 0.00 |",
		"| draft-only | 1 | 30.00 | 5.00 | 0.500 | – | 0.030 | 3.00x |",
		"### CFG on (scale 3",
		"| target-only | 1 | 20.00 | 8.00 | 0.950 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "CFG off") > strings.Index(out, "CFG on") {
		t.Errorf("scales out of order:\n%s", out)
	}
}

func TestTableRefusesMixedOrMissingRuns(t *testing.T) {
	row := []configResult{{Name: "target", Description: "target-only", FID: 1}}
	a := writeReport(t, Settings{N: 2000, Seed: 1, CFG: 1, Temperature: 1}, row)
	for _, c := range []struct {
		name, second, want string
	}{
		{"other N", writeReport(t, Settings{N: 500, Seed: 2, CFG: 1, Temperature: 1}, row), "settings differ"},
		{"same seed twice", writeReport(t, Settings{N: 2000, Seed: 1, CFG: 1, Temperature: 1}, row), "in two runs"},
		{"unfinished run", t.TempDir(), "is the run finished?"},
	} {
		_, err := Table([]string{a, c.second})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v; want one line containing %q", c.name, err, c.want)
		}
	}
}
