package scoring

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/fid"
	"marspec/generation"
	"marspec/mar"
	"marspec/onnxrt"
)

// ortModels opens the embedded packs and evaluator with ONNX Runtime (make setup fetches it).
type ortModels struct{ models *generation.ORTModels }

func newORTModels(t *testing.T) ortModels {
	t.Helper()
	models, ok := generation.TestORTModels()
	if !ok {
		t.Skip("ONNX Runtime not set up (make setup)")
	}
	return ortModels{models}
}

func (m ortModels) Open(pack, precision string) (*mar.Model, error) {
	return m.models.Model(pack, precision)
}
func (m ortModels) OpenEvaluator(name string) (*fid.Evaluator, error) {
	return generation.OpenEvaluator(name, onnxrt.SessionOptions{IntraOpThreads: 1})
}
func (m ortModels) Provider() string { return "cpu" }

// A scoring run through the package's API: open, generate both shards, report; resuming
// with other settings names the setting; the table reads the finished run.
func TestRunThroughTheAPI(t *testing.T) {
	m := newORTModels(t)
	dir := t.TempDir()
	s := Settings{N: 20, Seed: 3, Batch: 10, Chunk: 10, CFG: 1, Temperature: 1, Target: "target", Draft: "draft",
		Configs: []string{"target:num_iter=4", "spec:verify=group:gamma=4"}}
	run, err := Open(m, dir, s, "evaluator", "auto")
	if err != nil {
		t.Fatal(err)
	}
	if n := run.Missing(0, 1); n != 4 {
		t.Fatalf("a new run misses %d chunks, want 2 configurations x 2 chunks", n)
	}
	var made []string
	for shard := range 2 {
		if err := run.Generate(shard, 2, func(config string, chunk int, _ float64) {
			made = append(made, config)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(made) != 4 || run.Missing(0, 1) != 0 {
		t.Fatalf("made %v, %d still missing", made, run.Missing(0, 1))
	}
	var out bytes.Buffer
	if err := run.Report("", &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| target-only num_iter=4 |", "| spec gamma=4 prefill=0.05 verify=group acceptance=paper align=on |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range []string{"report.json", "report.md", "fid_vs_speedup.png", "target-it4-samples.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run folder lacks %s", f)
		}
	}
	other := s
	other.N = 30
	if _, err := Open(m, dir, other, "evaluator", "auto"); err == nil || !strings.Contains(err.Error(), "--n: the run has 20, this command 30") {
		t.Errorf("resume with another N: %v", err)
	}
	other = s
	other.Precision = "int8" // a run made at fp32 is not continued with int8 graphs
	if _, err := Open(m, dir, other, "evaluator", "auto"); err == nil || !strings.Contains(err.Error(), `--precision: the run has "", this command "int8"`) {
		t.Errorf("resume at another precision: %v", err)
	}
	if md, err := Table([]string{dir}); err != nil || !strings.Contains(md, "target-only num_iter=4") {
		t.Errorf("table of the run: %v\n%s", err, md)
	}
}

// A frontier through the API: the reference is sampled twice, the report marks the frontier,
// and Replot draws it again from frontier.json alone.
func TestFrontierThroughTheAPI(t *testing.T) {
	m := newORTModels(t)
	dir := t.TempDir()
	s := FrontierSettings{Settings: Settings{N: 10, Seed: 1, Batch: 10, Chunk: 10, CFG: 1, Temperature: 1, Target: "target",
		Draft: "draft", Configs: []string{"target:num_iter=4", "target:num_iter=2"}}, Reference: "target:num_iter=4", ReferenceSeed: 2}
	f, err := OpenFrontier(m, dir, s, "evaluator", "auto")
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Missing(0, 1); n != 3 {
		t.Fatalf("%d chunks missing, want 2 configurations and the reference's second sample", n)
	}
	if err := f.Generate(0, 1, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := f.Report("", &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "target:num_iter=4 (seed 2)") || !strings.Contains(out.String(), "Pareto: no other configuration") {
		t.Fatalf("frontier table:\n%s", out.String())
	}
	first, _ := os.ReadFile(filepath.Join(dir, "frontier.md"))
	os.Remove(filepath.Join(dir, "frontier.png"))
	out.Reset()
	if err := Replot(dir, &out); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "frontier.md"))
	if !bytes.Equal(first, again) || out.String() != string(first) {
		t.Error("replot wrote another table than the run's report")
	}
	if _, err := os.Stat(filepath.Join(dir, "frontier.png")); err != nil {
		t.Error("replot drew no plot")
	}
}

// A configuration's precision= runs it on the packs' int8 graphs beside the run's fp32 ones:
// its images are those of the same configuration in a run made at --precision int8 (the same
// FID to the last digit), and not the fp32 configuration's.
func TestConfigPrecision(t *testing.T) {
	m := newORTModels(t)
	fast := "target:num_iter=3:steps=1:sampler=distilled"
	fids := func(s Settings) map[string]float64 {
		t.Helper()
		dir := t.TempDir()
		run, err := Open(m, dir, s, "evaluator", "auto")
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Generate(0, 1, nil); err != nil {
			t.Fatal(err)
		}
		if err := run.Report("", io.Discard); err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Results []struct {
				Name string  `json:"name"`
				FID  float64 `json:"fid"`
			} `json:"results"`
		}
		raw, _ := os.ReadFile(filepath.Join(dir, "report.json"))
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, r := range rep.Results {
			out[r.Name] = r.FID
		}
		return out
	}
	s := Settings{N: 20, Seed: 5, Batch: 10, Chunk: 10, CFG: 1, Temperature: 1, Target: "target", Draft: "draft",
		Configs: []string{fast, fast + ":precision=int8"}}
	mixed := fids(s)
	s.Precision, s.Configs = "int8", []string{fast}
	whole := fids(s)
	fp32, int8, ref := mixed["target-it3-s1-distilled"], mixed["target-it3-s1-distilled-int8"], whole["target-it3-s1-distilled"]
	if int8 == 0 || ref == 0 || int8 != ref {
		t.Errorf("precision=int8 in an fp32 run gave FID %v, the run at --precision int8 %v: want the same images (results %v, %v)", int8, ref, mixed, whole)
	}
	if fp32 == int8 {
		t.Errorf("the fp32 and int8 configurations gave the same FID %v: the int8 one did not run the int8 graphs", fp32)
	}
	if _, err := Open(m, t.TempDir(), Settings{N: 20, Seed: 5, Batch: 10, Chunk: 10, CFG: 1, Temperature: 1, Target: "target", Draft: "draft",
		Configs: []string{fast + ":precision=bf16"}}, "evaluator", "auto"); err == nil || !strings.Contains(err.Error(), `precision "bf16": unknown (allowed: fp32, int8, fp16)`) {
		t.Errorf("precision=bf16: %v", err)
	}
}
