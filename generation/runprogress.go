package generation

import (
	"fmt"
	"io"
	"time"

	"marspec/progress"
)

// RunProgress shows how far a run is inside its images: the tokens decoded of all its images,
// the rate and the time left (progress.Reporter: a bar on a terminal, a line at most every
// second otherwise), with the AR step (or round) and the images finished; and after the first
// AR step, what the whole run will take at that pace, so a long run says so before it takes it.
// A nil *RunProgress (quiet) shows nothing.
type RunProgress struct {
	bar       *progress.Reporter
	images    int
	tokens    int
	start     time.Time
	now       func() time.Time
	estimated bool
}

// NewRunProgress starts showing the progress of plan's run on w (nil when opt is quiet).
// Start it just before the run: the first AR step is timed from here.
func NewRunProgress(w io.Writer, plan Plan, opt progress.Options) *RunProgress {
	tokens := plan.Images() * plan.SeqLen
	bar := progress.New(w, "generate", "tokens", tokens, opt)
	if bar == nil {
		return nil
	}
	return &RunProgress{bar: bar, images: plan.Images(), tokens: tokens, start: time.Now(), now: time.Now}
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
	p.bar.Set(s.Tokens, p.note(s))
	if !p.estimated {
		if line := p.estimate(s); line != "" {
			p.estimated = true
			p.bar.Println(line)
		}
	}
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
// time so far scaled by the tokens left (spec mode, once a round has decoded some). "" until
// it can say.
func (p *RunProgress) estimate(s Step) string {
	took := p.now().Sub(p.start)
	what := "this image"
	if p.images > 1 {
		what = fmt.Sprintf("the %d images", p.images)
	}
	if s.Steps > 0 {
		batches := max(1, s.Batches)
		total := took * time.Duration(s.Steps*batches)
		if batches > 1 {
			what += fmt.Sprintf(" in %d batches", batches)
		}
		return fmt.Sprintf("AR step %d/%d took %s: about %s for %s (estimated from this step)",
			s.Step, s.Steps, progress.Span(took), progress.Span(total), what)
	}
	if s.Tokens == 0 {
		return ""
	}
	total := time.Duration(float64(took) * float64(p.tokens) / float64(s.Tokens))
	return fmt.Sprintf("round %d decoded %d of %d tokens in %s: about %s for %s (estimated from these rounds)",
		s.Step, s.Tokens, p.tokens, progress.Span(took), progress.Span(total), what)
}
