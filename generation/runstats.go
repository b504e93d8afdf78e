package generation

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"marspec/arsampler"
)

// WriteRunStats writes a finished run's statistics as `marspec generate` reports them: one JSON
// object (asJSON: mode, pack, images, timings, the PNG parameters, and for spec mode its
// configuration and every counter of the summary), or a line per mode and, for spec mode,
// the acceptance, rejection, pass counts, the predicted GPU speedup and what a lossy setting
// may cost.
func WriteRunStats(w io.Writer, plan Plan, cat Catalog, res Result, asJSON bool) error {
	man := cat.Target
	if plan.Mode == ModeDraft {
		man = cat.Draft
	}
	n := len(res.Images)
	base := map[string]any{"mode": plan.Mode, "pack": man.Name, "images": n, "seconds": res.Seconds,
		"images_per_second": float64(n) / res.Seconds, "params": plan.Params()}
	if plan.Preset != "" {
		base["preset"] = plan.Preset
	}
	sum := res.Summary
	if sum != nil {
		cfg := plan.Spec
		draft := plan.DraftSource()
		if !cfg.SelfDraft && !cfg.EarlyExit {
			draft = cat.Draft.Name
		}
		base["config"], base["draft"], base["schedule"] = plan.SpecText(), draft, cfg.Schedule.String()
		base["lossless"], base["rejection"], base["tolerance"] = cfg.Lossless(), cfg.Rejection.String(), cfg.Tolerance
		if cfg.EarlyExit {
			base["exit_max_error"], base["exit_stops"] = cfg.ExitMaxError, exitStops(res.Images)
		}
	}
	if asJSON {
		if sum != nil {
			data, _ := json.Marshal(sum)
			_ = json.Unmarshal(data, &base)
		}
		return json.NewEncoder(w).Encode(base)
	}
	if sum == nil {
		fmt.Fprintf(w, "%s mode (%s): %d images in %.2f s (%.2f images/s)\n", plan.Mode, man.Name, n, res.Seconds, float64(n)/res.Seconds)
		return nil
	}
	printSpecSummary(w, base, sum)
	return nil
}

func printSpecSummary(w io.Writer, base map[string]any, s *arsampler.Summary) {
	fmt.Fprintf(w, "spec (%s): %d images in %.2f s (target %.2f s, draft %.2f s, other %.2f s)\n",
		base["config"], s.Images, s.Seconds, s.TargetSeconds, s.DraftSeconds, s.OtherSeconds)
	fmt.Fprintf(w, "  alpha %.3f (%.0f%% Hoeffding interval %.3f to %.3f; per-image mean %.3f, %.3f to %.3f): %d of %d drafts accepted\n",
		s.Alpha, 100*s.AlphaConfidence, s.AlphaLow, s.AlphaHigh, s.ImageAlphaMean, s.ImageAlphaLow, s.ImageAlphaHigh, s.Accepted, s.Drafted)
	fmt.Fprintf(w, "  rejected: %d resampled (%d tries, %d bound hits), %d taken from the target; %d bonus, %d pre-filled, %d target-only\n",
		s.Resampled, s.ResamplerTries, s.ResamplerBoundHits, s.Fallbacks, s.Bonus, s.Prefilled, s.TargetOnly)
	fmt.Fprintf(w, "  target: %d passes (%d rows, %.2f per token); draft: %d passes (%d rows), %d rows drafted by the target's head (self, exit); %d rounds, mean gamma %.2f, %.2f tokens per target pass\n",
		s.TargetForwards, s.TargetRows, s.RowsPerToken, s.DraftForwards, s.DraftRows, s.DraftHeadRows, s.Rounds, s.MeanGamma, s.TokensPerTarget)
	verify := "1"
	if s.VerifyCost != 1 { // early exit: verification runs only the blocks after the exit
		verify = fmt.Sprintf("verification %.3f", s.VerifyCost)
	}
	fmt.Fprintf(w, "  predicted GPU speedup %.2fx = %.2f tokens per pass / (%s + c %.3f x %.2f draft calls per round)\n",
		s.PredictedGPUSpeedup, s.TokensPerTarget, verify, s.CostRatio, s.DraftCallsPerRound)
	if stops, ok := base["exit_stops"].(int); ok {
		fmt.Fprintf(w, "  early exit: %d image rounds stopped drafting at the confidence bound (exit max error %g; 0 = none)\n", stops, base["exit_max_error"])
	}
	fmt.Fprintf(w, "  draft-target token distance (RMS) %.3f, mean log Sigma %.3f\n", s.MeanTokenDistance, s.MeanLogSigma)
	if lossless, _ := base["lossless"].(bool); !lossless {
		fmt.Fprintf(w, "  lossy: %s\n", lossyNote(base, s))
	}
}

// exitStops counts the early-exit rounds whose drafting the exit's confidence bound ended.
func exitStops(imgs []Image) int {
	n := 0
	for _, im := range imgs {
		if im.Spec != nil {
			n += im.Spec.ExitStops
		}
	}
	return n
}

// lossyNote says how far the run's knobs may move each token's law (docs/speculative.md).
func lossyNote(base map[string]any, s *arsampler.Summary) string {
	var notes []string
	if base["rejection"] == "target" {
		notes = append(notes, fmt.Sprintf("rejection=target: TV to the target per token <= its acceptance, alpha %.3f (at most %.3f)", s.Alpha, s.AlphaHigh))
	}
	if tol, _ := base["tolerance"].(float64); tol > 0 {
		notes = append(notes, fmt.Sprintf("tolerance %g: added acceptance (per-token TV bias with exact+residual) %.3f", tol, s.ToleranceTVBias))
	}
	if len(notes) == 0 {
		notes = append(notes, "not prefix+exact: see docs/speculative.md")
	}
	return strings.Join(notes, "; ")
}
