package generation

import (
	"fmt"
	"io"
	"time"

	"marspec/mar"
	"marspec/progress"
)

// RunProgress shows how far a run is inside its images: the tokens decoded of all its images,
// the rate and the time left (progress.Reporter: a bar on a terminal, a line at most every
// second otherwise), with the AR step (or round) and the images finished; and after the first
// AR step (with the cache across AR steps and no costs timed, the first lazy ones), what the
// whole run will take at that pace, so a long run says so before it takes it. A nil
// *RunProgress (quiet) shows nothing.
//
// With the costs timed at open, the AR steps are weighed by them (Costs.Steps, StepShare):
// the tokens' rate would put the time left of a 64-step image of 256 tokens at 255 first
// steps' time after its first step, four times the 63 a pass-bound run takes. The time so far, scaled by the estimated
// cost of the steps left against those done, is the time left and the estimate.
type RunProgress struct {
	bar       *progress.Reporter
	images    int
	tokens    int
	model     []time.Duration // Costs.Steps of an image, nil when no costs were timed
	cache     mar.CacheSettings
	start     time.Time
	now       func() time.Time
	estimated bool
	// last is when the previous step ended; full and fullSteps the time and count of the
	// first batch's full-pass steps before its first lazy one, lazy the faster of its first
	// lazy steps so far and lazySteps their count (the cache's estimate).
	last      time.Time
	full      time.Duration
	fullSteps int
	lazy      time.Duration
	lazySteps int
}

// NewRunProgress starts showing the progress of plan's run on w (nil when opt is quiet), its
// AR steps weighed by costs (nil: none timed, or spec mode). Start it just before the run: the
// first AR step is timed from here.
func NewRunProgress(w io.Writer, plan Plan, opt progress.Options, costs *Costs) *RunProgress {
	tokens := plan.Images() * plan.SeqLen
	var model []time.Duration
	if costs != nil && plan.Spec == nil {
		model = costs.Steps(plan.Options, plan.SeqLen)
		opt.TimeLeft = true
	}
	bar := progress.New(w, "generate", "tokens", tokens, opt)
	if bar == nil {
		return nil
	}
	return &RunProgress{bar: bar, images: plan.Images(), tokens: tokens, model: model, cache: plan.Options.Cache, start: time.Now(), now: time.Now}
}

// Watch is what the run tells the progress (its Step).
func (p *RunProgress) Watch() Watch {
	if p == nil {
		return Watch{}
	}
	return Watch{Step: p.step}
}

// Done ends the bar.
func (p *RunProgress) Done() {
	if p != nil {
		p.bar.Done()
	}
}

func (p *RunProgress) step(s Step) {
	if p.model != nil {
		if done := p.doneShare(s); done > 0 {
			took := p.now().Sub(p.start)
			p.bar.SetLeft(time.Duration(float64(took) * (1 - done) / done))
		}
	}
	p.bar.Set(s.Tokens, p.note(s))
	if !p.estimated {
		if line := p.estimate(s); line != "" {
			p.estimated = true
			p.bar.Println(line)
		}
	}
	p.last = p.now()
}

// doneShare is the share of the run done after s by the model's weights: the batches before
// and the steps of this one (every batch counted as one image's schedule, StepShare), or by
// the tokens when the steps are not the model's; 0 when nothing is done.
func (p *RunProgress) doneShare(s Step) float64 {
	if s.Steps != len(p.model) || s.Steps == 0 {
		return float64(s.Tokens) / float64(max(1, p.tokens))
	}
	return (float64(s.Batch-1) + StepShare(p.model, s.Step, s.Steps)) / float64(max(1, s.Batches))
}

// note says where the run is: "AR step 5/256 of batch 1/2, 0/4 images" (target and draft
// modes) or "round 12, 1/4 images" (spec mode).
func (p *RunProgress) note(s Step) string {
	where := fmt.Sprintf("round %d", s.Step)
	if s.Steps > 0 {
		where = fmt.Sprintf("AR step %d/%d", s.Step, s.Steps)
		if s.Batches > 1 {
			where += fmt.Sprintf(" of batch %d/%d", s.Batch, s.Batches)
		}
	}
	return fmt.Sprintf("%s, %d/%d images", where, s.Images, p.images)
}

// estimate is the line that says, at the first step, what the run will take at its pace: the
// first AR step's time times the AR steps of every batch (target and draft modes), or the
// time so far scaled by the tokens left (spec mode, once a round has decoded some). With the
// cache, whose lazy steps cost a share of a full pass, it waits for the first two lazy steps
// (the first call of a lazy size allocates its tensors: the faster is the steady cost, as the
// timings at open take the fastest): the full-pass steps' mean time each full-pass step, and
// the faster lazy step's each lazy one. "" until it can say.
func (p *RunProgress) estimate(s Step) string {
	now := p.now()
	since := p.last
	if since.IsZero() {
		since = p.start
	}
	took := now.Sub(since) // this step
	what := "this image"
	if p.images > 1 {
		what = fmt.Sprintf("the %d images", p.images)
	}
	if s.Steps > 0 {
		batches := max(1, s.Batches)
		if batches > 1 {
			what += fmt.Sprintf(" in %d batches", batches)
		}
		if p.model != nil && s.Steps == len(p.model) {
			if done := p.doneShare(s); done > 0 {
				total := time.Duration(float64(now.Sub(p.start)) / done)
				return fmt.Sprintf("AR step %d/%d took %s: about %s for %s (estimated from this step, the AR steps weighed by the costs timed at open)",
					s.Step, s.Steps, progress.Span(took), progress.Span(total), what)
			}
		}
		lazy := 0
		for k := range s.Steps {
			if p.cache.Kind(k, s.Steps) == mar.StepLazy {
				lazy++
			}
		}
		if lazy == 0 {
			total := took * time.Duration(s.Steps*batches)
			return fmt.Sprintf("AR step %d/%d took %s: about %s for %s (estimated from this step)",
				s.Step, s.Steps, progress.Span(took), progress.Span(total), what)
		}
		if p.cache.Kind(s.Step-1, s.Steps) != mar.StepLazy {
			p.full += took
			p.fullSteps++
			return ""
		}
		if p.lazySteps == 0 || took < p.lazy {
			p.lazy = took
		}
		p.lazySteps++
		if p.lazySteps < min(2, lazy) {
			return ""
		}
		mean := p.full / time.Duration(max(1, p.fullSteps))
		total := (mean*time.Duration(s.Steps-lazy) + p.lazy*time.Duration(lazy)) * time.Duration(batches)
		return fmt.Sprintf("AR step %d/%d: the cache's lazy steps took %s, the %d full-pass steps before them %s each: about %s for %s (estimated from these steps)",
			s.Step, s.Steps, progress.Span(p.lazy), p.fullSteps, progress.Span(mean), progress.Span(total), what)
	}
	if s.Tokens == 0 {
		return ""
	}
	took = now.Sub(p.start) // the rounds so far
	total := time.Duration(float64(took) * float64(p.tokens) / float64(s.Tokens))
	return fmt.Sprintf("round %d decoded %d of %d tokens in %s: about %s for %s (estimated from these rounds)",
		s.Step, s.Tokens, p.tokens, progress.Span(took), progress.Span(total), what)
}
