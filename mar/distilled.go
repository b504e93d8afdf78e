package mar

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"marspec/diffusion"
	"marspec/onnxrt"
)

// DistilledHeadFormat is the only distilled_head format this build reads.
const DistilledHeadFormat = "marspec-distilled-head/1"

// DistilledHead is a few-step student of the diffusion head (scripts/train/distill_head.py): a
// consistency function that maps a noisy token x_t at training timestep t, with both
// conditioning vectors and the guidance scale, to the token x0 the teacher's ODE would reach.
type DistilledHead interface {
	// Predict fills x0 [n, D] from xt [n, D], t [n] (training timesteps), z and zUncond [n, W]
	// and cfg [n] (the guidance scale; 1 with zUncond = z when guidance is off).
	Predict(xt, t, z, zUncond, cfg []float32, n int, x0 []float32) error
}

// DistilledHeadSpec is the manifest's optional "distilled_head" entry (docs/model-pack.md).
type DistilledHeadSpec struct {
	File   string `json:"file"`
	Format string `json:"format"`
	// Steps are the step counts it was trained for; Times[K] the training timesteps of a
	// K-step run, first (999, pure noise) to last.
	Steps    []int            `json:"steps"`
	Times    map[string][]int `json:"times"`
	CFGMax   float64          `json:"cfg_max"`  // the largest guidance scale it was trained on
	Predicts string           `json:"predicts"` // "x0"
	Training json.RawMessage  `json:"training,omitempty"`
}

func (s *DistilledHeadSpec) validate(m *Manifest) error {
	switch {
	case s.Format != DistilledHeadFormat:
		return fmt.Errorf("distilled_head format %q unsupported (allowed: %s)", s.Format, DistilledHeadFormat)
	case !isPackFileName(s.File):
		return fmt.Errorf("distilled_head file %q: want a file name in the pack folder ending in .onnx", s.File)
	case s.Predicts != "x0":
		return fmt.Errorf("distilled_head predicts %q unsupported (allowed: x0)", s.Predicts)
	case !(s.CFGMax >= 1):
		return fmt.Errorf("distilled_head cfg_max %g must be at least 1", s.CFGMax)
	case len(s.Steps) == 0:
		return fmt.Errorf("distilled_head steps is missing or empty")
	}
	for _, k := range s.Steps {
		times := s.Times[strconv.Itoa(k)]
		if k < 1 || len(times) != k {
			return fmt.Errorf("distilled_head times for %d steps: %v, want %d training timesteps", k, times, k)
		}
		for i, t := range times {
			// strictly decreasing within the training schedule: each step starts less noisy
			if t < 0 || t >= m.Diffusion.TrainingSteps || (i > 0 && t >= times[i-1]) {
				return fmt.Errorf("distilled_head times for %d steps: %v, want decreasing timesteps in 0 to %d",
					k, times, m.Diffusion.TrainingSteps-1)
			}
		}
	}
	return nil
}

// StepsText lists the trained step counts as error messages print them ("1, 2, 4").
func (s *DistilledHeadSpec) StepsText() string {
	parts := make([]string, len(s.Steps))
	for i, k := range s.Steps {
		parts[i] = strconv.Itoa(k)
	}
	return strings.Join(parts, ", ")
}

// OptionError is a sampling option a model cannot honour, named as a request field, so the
// CLI's messages and the service's 400s come from one rule (generation turns it into a
// FieldError).
type OptionError struct {
	Field, Value, Allowed, Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("%s %s: %s (allowed: %s)", e.Field, e.Value, e.Reason, e.Allowed)
}

// CheckDistilled is the one place that says which options the distilled sampler accepts with
// the pack m: the trained step counts, no annealing and guidance up to the trained scale. Any
// temperature the request allows fits: it scales the student's input noise (runDistilled).
// It returns nil for other samplers.
func CheckDistilled(m *Manifest, opt Options) *OptionError {
	if opt.Sampler != diffusion.Distilled {
		return nil
	}
	s := m.DistilledHead
	if s == nil {
		return &OptionError{"sampler", string(diffusion.Distilled), "ddpm, ddim, dpmpp-2m, dpmpp-2m-sde",
			"pack " + m.Name + " has no distilled_head (scripts/train/distill_head.py adds one)"}
	}
	switch {
	case !slices.Contains(s.Steps, opt.Steps):
		return &OptionError{"steps", strconv.Itoa(opt.Steps), s.StepsText(),
			"the distilled head samples only in the step counts it was trained for"}
	case opt.StepsLate != 0:
		return &OptionError{"steps_late", strconv.Itoa(opt.StepsLate), "0 (no annealing)",
			"the distilled head's step counts are fixed by training"}
	case opt.CFG > s.CFGMax:
		return &OptionError{"cfg", strconv.FormatFloat(opt.CFG, 'g', -1, 64),
			fmt.Sprintf("1 to %g with sampler distilled", s.CFGMax), "above the guidance scales it was trained on"}
	}
	return nil
}

// ONNXDistilledHead runs the pack's distilled_head graph.
type ONNXDistilledHead struct{ *onnxrt.Graph }

// NewONNXDistilledHead opens the graph and checks its inputs and outputs against the pack.
func NewONNXDistilledHead(data []byte, m *Manifest, opt onnxrt.SessionOptions, source string) (*ONNXDistilledHead, error) {
	D, W := int64(m.TokenDim), int64(m.Width)
	g, err := onnxrt.NewGraph(data, source, opt,
		[]onnxrt.IOSpec{{Name: "x_t", Shape: []int64{-1, D}}, {Name: "t", Shape: []int64{-1}}, {Name: "z", Shape: []int64{-1, W}},
			{Name: "z_uncond", Shape: []int64{-1, W}}, {Name: "cfg", Shape: []int64{-1}}},
		[]onnxrt.IOSpec{{Name: "x0", Shape: []int64{-1, D}}})
	if err != nil {
		return nil, err
	}
	return &ONNXDistilledHead{g}, nil
}

func (h *ONNXDistilledHead) Predict(xt, t, z, zUncond, cfg []float32, n int, x0 []float32) error {
	return h.RunInto(n, x0, xt, t, z, zUncond, cfg)
}
