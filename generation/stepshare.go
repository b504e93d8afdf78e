package generation

import "time"

// StepShare is the share of an image's time spent once it has run step of its steps AR
// steps, each step weighed by what it costs: costs are an image's Costs.Steps under its
// options. Under MAR's schedule the first steps reveal a token or so and the last many, while
// each step costs a transformer pass and its tokens' head calls, so the share of the tokens
// known says little about the share of the time spent. Without costs of this schedule (none
// timed, as on a server) the steps weigh alike: right where the pass outweighs a step's head
// calls, and short early where the head's share of the late steps is large.
func StepShare(costs []time.Duration, step, steps int) float64 {
	if steps <= 0 {
		return 0
	}
	step = min(max(step, 0), steps)
	var all, done time.Duration
	if len(costs) == steps {
		for k, d := range costs {
			all += d
			if k < step {
				done += d
			}
		}
	}
	if all <= 0 {
		return float64(step) / float64(steps)
	}
	return float64(done) / float64(all)
}
