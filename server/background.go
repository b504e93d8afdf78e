package server

import (
	"context"
	"sync"
	"time"
)

// background runs the server's own loops (the deadline and retention sweeps, the webhook
// deliverer) until halt; a loop's context ends at halt, and halt waits for every loop and what
// it started.
type background struct {
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func newBackground() *background {
	ctx, stop := context.WithCancel(context.Background())
	return &background{ctx: ctx, stop: stop}
}

// run starts f in a goroutine of its own.
func (b *background) run(f func(ctx context.Context)) {
	b.wg.Add(1)
	go func() { defer b.wg.Done(); f(b.ctx) }()
}

// everyTick runs do every interval and on each wake (nil: ticks only) until halt.
func (b *background) everyTick(interval time.Duration, wake <-chan struct{}, do func(ctx context.Context)) {
	b.run(func(ctx context.Context) { tickUntilDone(ctx, interval, wake, func() { do(ctx) }) })
}

// tickUntilDone runs do every interval and on each wake (nil: ticks only) until ctx ends: the
// loop of the background work and of a replica's claim and watch loops.
func tickUntilDone(ctx context.Context, interval time.Duration, wake <-chan struct{}, do func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C:
		}
		do()
	}
}

// halt ends the loops and waits for them.
func (b *background) halt() {
	b.stop()
	b.wg.Wait()
}

// startBackground starts the deadline sweep, the retention sweep and, when webhooks are on,
// their deliverer.
func (s *Server) startBackground() {
	s.bg = newBackground()
	s.bg.everyTick(deadlineSweepEvery, nil, func(context.Context) { s.sweepDeadlines() })
	s.bg.everyTick(sweepEvery, nil, func(context.Context) { s.ret.sweepTick() })
	if s.hooks != nil {
		s.bg.everyTick(webhookPollEvery, s.hooks.wake, s.hooks.claimAndSend)
	}
}
