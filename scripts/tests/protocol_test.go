package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// officialEvalArgs are the sampling arguments of MAR's official evaluation commands (its
// README, algorithm notes §10), written out here independently of export_mar.py: what `eval
// --protocol mar` must run, setting for setting, on a pack of each size. The official code
// samples the last diffusion step without noise (guided diffusion's p_sample masks it at t=0).
var officialEvalArgs = map[string]struct {
	cfg                    float64
	numIter, steps         int
	cfgSchedule            string
	temperature            float64
	imagesPerClass, images int
}{
	"mar_base":  {2.9, 256, 100, "linear", 1.0, 50, 50000},
	"mar_large": {3.0, 256, 100, "linear", 1.0, 50, 50000},
	"mar_huge":  {3.2, 256, 100, "linear", 1.0, 50, 50000},
}

// TestProtocolMARRunsTheOfficialArguments runs `marspec eval --protocol mar` at N = 10 on the CI
// pack (MAR-B's token layout, random weights, a few MB) carrying each size's published settings,
// with a tiny evaluator, and checks what the run pinned in run.json and printed against the
// official evaluation arguments of that size; then that the protocol refuses a flag that would
// change a setting, and a pack without an evaluation preset.
func TestProtocolMARRunsTheOfficialArguments(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	target := map[string]string{}
	for size := range officialEvalArgs {
		if size == "mar_base" { // ci_target carries MAR-B's own
			target[size] = randomPack(t, "ci_target", "")
		} else {
			target[size] = randomPack(t, "ci_target", size)
		}
	}
	ev := tinyEvaluator(t)
	bin := buildMarspec(t)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"eval", "--protocol", "mar", "--quiet", "--threads", "1"}, args...)...)
		cmd.Env = append(os.Environ(), "MARSPEC_ORT_LIB="+lib)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for size, want := range officialEvalArgs {
		t.Run(size, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			out, err := run("--target", target[size], "--n", "10", "--chunk", "10", "--batch", "10", "--evaluator", ev,
				"--reference", filepath.Join(ev, "reference.npz"), "--out", dir)
			if err != nil {
				t.Fatalf("eval --protocol mar: %v\n%s", err, out)
			}
			var got struct {
				N           int      `json:"n"`
				CFG         float64  `json:"cfg"`
				CFGSchedule string   `json:"cfg_schedule"`
				Temperature float64  `json:"temperature"`
				Steps       int      `json:"steps"`
				Configs     []string `json:"configs"`
				Protocol    string   `json:"protocol"`
				Preset      string   `json:"preset"`
				Target      string   `json:"target"`
				Draft       string   `json:"draft"`
			}
			data, err := os.ReadFile(filepath.Join(dir, "run.json"))
			if err != nil || json.Unmarshal(data, &got) != nil {
				t.Fatalf("run.json: %v\n%s", err, data)
			}
			config := "target:num_iter=256:final_noise=off"
			if got.CFG != want.cfg || got.CFGSchedule != want.cfgSchedule || got.Temperature != want.temperature || got.Steps != want.steps ||
				len(got.Configs) != 1 || got.Configs[0] != config || got.Protocol != "mar" || got.Preset != "paper" || got.N != 10 || got.Draft != got.Target {
				t.Errorf("run.json pins %+v; want cfg %g %s, temperature %g, %d steps, configuration %s (num_iter %d), protocol mar, preset paper, N 10",
					got, want.cfg, want.cfgSchedule, want.temperature, want.steps, config, want.numIter)
			}
			for _, line := range []string{
				"protocol mar on pack " + target[size] + ": preset paper [published: MAR official README",
				"num_iter 256, ddpm in 100 steps, cfg " + trimFloat(want.cfg) + " (linear schedule), temperature 1, final step noise false",
				"first look: 10 of the protocol's 50000 images (50 per class)",
			} {
				if !strings.Contains(out, line) {
					t.Errorf("eval's output lacks %q:\n%s", line, out)
				}
			}
		})
	}
	// a flag that would change a setting, a pack without an evaluation preset, no reference
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", target["mar_base"], "--cfg", "4"}, "--cfg: protocol mar takes every sampling setting from the pack's evaluation preset"},
		{[]string{"--target", "target"}, "pack target has no evaluation_preset"},
		{[]string{"--target", target["mar_base"], "--evaluator", ev}, "--reference: protocol mar scores against ADM's reference batch"},
	} {
		args := append([]string{"--out", filepath.Join(t.TempDir(), "x")}, c.args...)
		if len(c.args) < 3 || c.args[2] != "--evaluator" {
			args = append(args, "--evaluator", ev, "--reference", filepath.Join(ev, "reference.npz"))
		}
		if out, err := run(args...); err == nil || !strings.Contains(out, c.want) {
			t.Errorf("eval --protocol mar %v: %v\n%s\nwant an error containing %q", c.args, err, out, c.want)
		}
	}
}

func trimFloat(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// tinyEvaluator writes an evaluator folder for tests: 32x32 colour input (256x256 images
// resized as the Inception evaluator resizes them), 8 random features, 4 classes, and an
// 8-d reference.npz beside it; its FIDs mean nothing, it only makes a run cheap to score.
func tinyEvaluator(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command(python, tool("tests", "tiny_evaluator.py"), dir).CombinedOutput(); err != nil {
		t.Fatalf("tiny evaluator: %v\n%s", err, out)
	}
	return dir
}
