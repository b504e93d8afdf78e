package onnxrt

import (
	"fmt"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// Tuning is what ONNX Runtime offers on the CPU beyond the thread count. The zero value is
// ONNX Runtime's own defaults (all graph optimisations, spinning intra-op threads, the CPU
// memory arena), so a caller that never names a setting changes nothing.
type Tuning struct {
	GraphOpt string // all (default), extended, basic or off
	NoSpin   bool   // intra-op threads sleep between calls instead of spinning
	NoArena  bool   // allocate per call instead of from the CPU memory arena
	// NoPrepack keeps each weight as the graph has it instead of a copy laid out for the CPU's
	// matrix kernels, which ONNX Runtime makes at session creation (the original then freed)
	NoPrepack bool
}

// TuningHelp describes the --ort-tuning value.
const TuningHelp = "ONNX Runtime CPU settings, comma-separated key=value: opt=all|extended|basic|off (graph optimisation), " +
	"spin=on|off (intra-op threads spin between calls), arena=on|off (CPU memory arena), prepack=on|off (weights re-laid for the matrix kernels); empty = ONNX Runtime's defaults"

var graphOptLevels = map[string]ort.GraphOptimizationLevel{
	"all": ort.GraphOptimizationLevelEnableAll, "extended": ort.GraphOptimizationLevelEnableExtended,
	"basic": ort.GraphOptimizationLevelEnableBasic, "off": ort.GraphOptimizationLevelDisableAll,
}

// ParseTuning reads "opt=extended,spin=off"; errors name the key or value and what is allowed.
func ParseTuning(s string) (Tuning, error) {
	var t Tuning
	if strings.TrimSpace(s) == "" {
		return t, nil
	}
	onOff := func(key, v string) (bool, error) {
		switch v {
		case "on":
			return true, nil
		case "off":
			return false, nil
		}
		return false, fmt.Errorf("ort tuning %s=%q: allowed on, off", key, v)
	}
	for _, kv := range strings.Split(s, ",") {
		key, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return t, fmt.Errorf("ort tuning %q: want key=value (keys: opt, spin, arena, prepack)", kv)
		}
		var err error
		var on bool
		switch key {
		case "opt":
			if _, known := graphOptLevels[v]; !known {
				return t, fmt.Errorf("ort tuning opt=%q: allowed all, extended, basic, off", v)
			}
			t.GraphOpt = v
		case "spin":
			on, err = onOff(key, v)
			t.NoSpin = !on
		case "arena":
			on, err = onOff(key, v)
			t.NoArena = !on
		case "prepack":
			on, err = onOff(key, v)
			t.NoPrepack = !on
		default:
			return t, fmt.Errorf("ort tuning key %q unknown (keys: opt, spin, arena, prepack)", key)
		}
		if err != nil {
			return t, err
		}
	}
	return t, nil
}

// Set makes *Tuning a flag.Value: --ort-tuning on the CLI's runtime flags and on serve.
func (t *Tuning) Set(s string) error {
	v, err := ParseTuning(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// String is the setting as ParseTuning reads it; "default" when nothing is changed.
func (t Tuning) String() string {
	var parts []string
	if t.GraphOpt != "" {
		parts = append(parts, "opt="+t.GraphOpt)
	}
	if t.NoSpin {
		parts = append(parts, "spin=off")
	}
	if t.NoArena {
		parts = append(parts, "arena=off")
	}
	if t.NoPrepack {
		parts = append(parts, "prepack=off")
	}
	if len(parts) == 0 {
		return "default"
	}
	return strings.Join(parts, ",")
}

func (t Tuning) apply(so *ort.SessionOptions) error {
	if t.GraphOpt != "" {
		if err := so.SetGraphOptimizationLevel(graphOptLevels[t.GraphOpt]); err != nil {
			return err
		}
	}
	if t.NoSpin {
		if err := so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
			return err
		}
	}
	if t.NoArena {
		if err := so.SetCpuMemArena(false); err != nil {
			return err
		}
	}
	if t.NoPrepack {
		if err := so.AddSessionConfigEntry("session.disable_prepacking", "1"); err != nil {
			return err
		}
	}
	return nil
}
