package generation

import (
	"testing"
	"time"
)

// An image's share of time spent weighs its AR steps by their costs, and alike without costs
// of its schedule; steps outside the schedule count as none or all of it.
func TestStepShare(t *testing.T) {
	costs := []time.Duration{time.Second, time.Second, 2 * time.Second}
	for _, c := range []struct {
		costs       []time.Duration
		step, steps int
		want        float64
	}{
		{costs, 0, 3, 0}, {costs, 1, 3, 0.25}, {costs, 2, 3, 0.5}, {costs, 3, 3, 1},
		{nil, 1, 4, 0.25}, {costs, 1, 4, 0.25}, // no costs of a 4-step schedule: alike
		{costs, -1, 3, 0}, {costs, 5, 3, 1}, {nil, 1, 0, 0},
	} {
		if got := StepShare(c.costs, c.step, c.steps); got != c.want {
			t.Errorf("StepShare(%v, %d, %d) = %v, want %v", c.costs, c.step, c.steps, got, c.want)
		}
	}
}
