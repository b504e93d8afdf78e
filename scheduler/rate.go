package scheduler

import (
	"time"

	"marspec/api"
)

// withRate adds to p the rate of a running job, tokens decoded by this run over elapsed since
// it started, and the time left: elapsed scaled by the work left against the work this run
// did, both in images' worth of work (partial), where the tokens' rate put it four times too
// long early in an image under MAR's schedule. The job's pace so far is taken to go on: a step
// of merged images takes about as long for each, and images joining or leaving the batch
// change the pace, which the next reports follow. Without a token decoded there is no basis:
// both stay absent rather than claim an infinite time.
func withRate(p *api.Progress, tokens int, did, left float64, elapsed time.Duration) {
	if tokens <= 0 || did <= 0 || elapsed <= 0 {
		return
	}
	rate := float64(tokens) / elapsed.Seconds()
	secs := elapsed.Seconds() * max(0, left) / did
	p.TokensPerSecond, p.SecondsLeft = &rate, &secs
}
