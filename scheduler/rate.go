package scheduler

import (
	"time"

	"marspec/api"
)

// withRate adds to p the rate of a running job, tokens decoded by this run over elapsed since
// it started, and the time its tokens left take at that rate. Without a token decoded there is
// no basis: both stay absent rather than claim an infinite time.
func withRate(p *api.Progress, tokens int, elapsed time.Duration) {
	if tokens <= 0 || elapsed <= 0 {
		return
	}
	rate := float64(tokens) / elapsed.Seconds()
	left := float64(max(0, p.TokensTotal-p.TokensDone)) / rate
	p.TokensPerSecond, p.SecondsLeft = &rate, &left
}
