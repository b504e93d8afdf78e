package server

import (
	"encoding/json"
	"strings"
	"testing"

	"marspec/api"
	"marspec/generation"
)

// A request for fp16 on a CPU server is a 400 on precision saying why and what is allowed
// (not a 500 from a graph that cannot open), and a CPU server refuses --precision fp16 before
// it reads a pack.
func TestPrecisionFP16RefusedOnCPU(t *testing.T) {
	ts := start(t, "", false, nil)
	a := ts.call(t, "POST", "/v1/generations", `{"class":0,"precision":"fp16"}`)
	var e api.ErrorBody
	_ = json.Unmarshal(a.body, &e)
	if a.code != 400 || e.Field != "precision" {
		t.Fatalf("fp16 on a CPU server: %d %s, want a 400 on precision", a.code, a.body)
	}
	for _, want := range []string{"CUDA provider", "--device cuda", "fp32 or int8"} {
		if !strings.Contains(e.Error, want) {
			t.Errorf("the 400 says %q, lacking %q", e.Error, want)
		}
	}

	cfg := testConfig()
	cfg.Precision = "fp16"
	models, _ := generation.TestModels()
	if _, _, err := Open(cfg, models, nil, nil); err == nil || !strings.Contains(err.Error(), "--precision: precision fp16 needs the CUDA provider") {
		t.Errorf("Open with --precision fp16 on the CPU: %v", err)
	}
}
