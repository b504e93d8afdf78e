package mar

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Precisions a pack's transformer and head can run at. FP32 is the graphs every pack has;
// Int8 is the dynamically quantised variant scripts/packs/quantize_pack.py adds; FP16 the half
// precision variant scripts/packs/half_pack.py adds, for the CUDA provider only
// (docs/model-pack.md, docs/gpu.md).
const (
	FP32 = "fp32"
	Int8 = "int8"
	FP16 = "fp16"
)

// reducedPrecisions are the precisions a manifest's precisions entry may name, in
// PrecisionNames' order.
var reducedPrecisions = []string{Int8, FP16}

// PrecisionNames lists the precisions, default first, for messages and flag help.
func PrecisionNames() string { return FP32 + ", " + strings.Join(reducedPrecisions, ", ") }

// QuantizeHint says how a pack gets its int8 graphs, for error messages.
const QuantizeHint = "/usr/bin/python3 scripts/packs/quantize_pack.py PACK adds them"

// HalfHint says how a pack gets its fp16 graphs, for error messages.
const HalfHint = "/usr/bin/python3 scripts/packs/half_pack.py PACK adds them"

// PrecisionHint says how a pack gets the graphs of a reduced precision.
func PrecisionHint(precision string) string {
	if precision == FP16 {
		return HalfHint
	}
	return QuantizeHint
}

// CPUPrecisions are the precisions the CPU provider runs, for messages.
const CPUPrecisions = FP32 + " or " + Int8

// ErrFP16OnCPU is why fp16 is refused off the CUDA provider: ONNX Runtime's CPU provider has
// fp16 kernels for a few operators only and runs the others by casting back to fp32, so the
// graphs would only be slower and less exact there (docs/gpu.md, "Half precision").
var ErrFP16OnCPU = errors.New("precision " + FP16 + " needs the CUDA provider (--device cuda): ONNX Runtime's CPU provider has no fp16 kernels for these graphs (it would cast them back to fp32); on the CPU use " + CPUPrecisions)

// CheckPrecisionProvider says whether precision runs on provider ("cpu" or "" for the CPU,
// "cuda"): fp16 needs CUDA.
func CheckPrecisionProvider(precision, provider string) error {
	if precision == FP16 && provider != "cuda" {
		return ErrFP16OnCPU
	}
	return nil
}

// PrecisionSpec names the graphs of one reduced precision in the pack folder (the manifest's
// precisions entry). Quantization is the script's free-form record of what it did.
type PrecisionSpec struct {
	Transformer string `json:"transformer"`
	Head        string `json:"head"`
	HeadLoop    string `json:"head_loop,omitempty"`
	// HeadLoopUnrolled are the fused head unrolled at this precision (Manifest.HeadLoop.Unrolled)
	HeadLoopUnrolled []UnrolledLoop `json:"head_loop_unrolled,omitempty"`
	// Cached is the cached transformer at this precision (the manifest's cache graph, scripts/
	// packs/cached_transformer.py); "" in a pack quantised before the cached graph was.
	Cached string `json:"transformer_cached,omitempty"`
	// Picked is the picked transformer at this precision (the manifest's picked graph); "" in a
	// pack quantised before it had one.
	Picked       string          `json:"transformer_picked,omitempty"`
	Quantization json.RawMessage `json:"quantization,omitempty"`
	// HeadLoopNeverClips: the fused head's sampler was specialised to a pack that never clips x0
	// and ignores its clip input (half_pack.py folds such a posterior step into fewer nodes).
	HeadLoopNeverClips bool `json:"head_loop_never_clips,omitempty"`
}

// ParsePrecision checks a precision name; "" is FP32.
func ParsePrecision(s string) (string, error) {
	switch s {
	case "", FP32:
		return FP32, nil
	case Int8, FP16:
		return s, nil
	}
	return "", fmt.Errorf("precision %q unknown (allowed: %s)", s, PrecisionNames())
}

// graphFiles are the transformer, head, fused-head and cached-transformer files a precision
// opens; headLoop is "" when the pack has no fused head, cached when it has no cached graph at
// this precision, picked when it has no picked transformer at it.
type graphFiles struct {
	transformer, head, headLoop, cached, picked string
	unrolled                                    []UnrolledLoop // the fused head unrolled for given step counts
}

// graphFiles resolves the files of precision (ParsePrecision's names) in this pack; a pack
// without that precision's graphs is an error naming the pack and how to add them.
func (m *Manifest) graphFiles(precision string) (graphFiles, error) {
	precision, err := ParsePrecision(precision)
	if err != nil {
		return graphFiles{}, err
	}
	if precision == FP32 {
		f := graphFiles{transformer: "transformer.onnx", head: "head.onnx"}
		if m.HeadLoop != nil {
			f.headLoop, f.unrolled = m.HeadLoop.File, m.HeadLoop.Unrolled
		}
		if m.Cache != nil {
			f.cached = m.Cache.File
		}
		if m.Picked != nil {
			f.picked = m.Picked.File
		}
		return f, nil
	}
	spec, ok := m.Precisions[precision]
	if !ok {
		return graphFiles{}, fmt.Errorf("model pack %s has no %s graphs (%s)", m.Name, precision, PrecisionHint(precision))
	}
	return graphFiles{transformer: spec.Transformer, head: spec.Head, headLoop: spec.HeadLoop, cached: spec.Cached,
		picked: spec.Picked, unrolled: spec.HeadLoopUnrolled}, nil
}

// HasCachedAt reports whether the pack has a cached transformer at precision.
func (m *Manifest) HasCachedAt(precision string) bool {
	f, err := m.graphFiles(precision)
	return err == nil && f.cached != ""
}

// HasPrecision reports whether the pack can run at precision (ParsePrecision's names).
func (m *Manifest) HasPrecision(precision string) bool {
	_, err := m.graphFiles(precision)
	return err == nil
}

// validatePrecisions checks the precisions entry: known names, file names in the folder, and a
// fused head wherever the fp32 graphs have one (so a precision never mixes in fp32 graphs).
func (m *Manifest) validatePrecisions() error {
	names := make([]string, 0, len(m.Precisions))
	for name := range m.Precisions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		spec := m.Precisions[name]
		switch {
		case !slices.Contains(reducedPrecisions, name):
			return fmt.Errorf("precisions: %q unsupported (allowed: %s; fp32 is the pack's own graphs)", name, strings.Join(reducedPrecisions, ", "))
		case !isPackFileName(spec.Transformer) || !isPackFileName(spec.Head):
			return fmt.Errorf("precisions %s: transformer %q and head %q must be file names in the pack folder ending in .onnx", name, spec.Transformer, spec.Head)
		case spec.HeadLoop != "" && !isPackFileName(spec.HeadLoop):
			return fmt.Errorf("precisions %s: head_loop %q must be a file name in the pack folder ending in .onnx", name, spec.HeadLoop)
		case spec.Cached != "" && (m.Cache == nil || !isPackFileName(spec.Cached)):
			return fmt.Errorf("precisions %s: transformer_cached %q needs the pack's cache graph and must be a file name in the pack folder ending in .onnx", name, spec.Cached)
		case spec.Picked != "" && (m.Picked == nil || !isPackFileName(spec.Picked)):
			return fmt.Errorf("precisions %s: transformer_picked %q needs the pack's picked graph and must be a file name in the pack folder ending in .onnx", name, spec.Picked)
		case spec.HeadLoopNeverClips && m.Diffusion.ClipX0:
			return fmt.Errorf("precisions %s: head_loop was made for a pack that never clips x0, but diffusion.clip_x0 is true (%s again writes it)", name,
				strings.TrimSuffix(PrecisionHint(name), " adds them"))
		case (m.HeadLoop != nil) != (spec.HeadLoop != ""):
			return fmt.Errorf("precisions %s: head_loop must be given exactly when the pack has a fused head (%s again writes it)", name,
				strings.TrimSuffix(PrecisionHint(name), " adds them"))
		}
		if err := validateUnrolled(m, "precisions "+name+": head_loop_unrolled", spec.HeadLoopUnrolled); err != nil {
			return err
		}
	}
	return nil
}
