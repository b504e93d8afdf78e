// Package progress tells a person how far a long command is: on a terminal a bar with the
// count, the rate and the time left (schollz/progressbar, so no escape codes of our own); in a
// log or a pipe one plain line per step, at most one a second plus the last, so the log reads
// without carriage returns; nothing when quiet.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Reporter counts units done out of a total. Safe for concurrent use; a nil *Reporter does
// nothing, so callers need not check.
type Reporter struct {
	mu      sync.Mutex
	w       io.Writer
	bar     *progressbar.ProgressBar // nil: plain lines
	label   string
	unit    string
	total   int
	done    int
	start   time.Time
	printed time.Time
	now     func() time.Time
	// ownLeft: the caller tells the time left (SetLeft); left is it, hasLeft once told
	ownLeft bool
	left    time.Duration
	hasLeft bool
}

// Options choose where and how a Reporter writes.
type Options struct {
	Quiet bool
	// Terminal forces the bar (true) or plain lines (false); nil asks whether w is a terminal.
	Terminal *bool
	// TimeLeft: the caller tells the time left (SetLeft) instead of the reporter reckoning it
	// from the count's rate, for units that cost unequal times (an image's tokens: MAR's
	// schedule reveals few in its first AR steps and many in its last).
	TimeLeft bool
}

// New starts a reporter of total units (images, chunks, features) named by label on w.
func New(w io.Writer, label, unit string, total int, opt Options) *Reporter {
	if opt.Quiet || w == nil {
		return nil
	}
	r := &Reporter{w: w, label: label, unit: unit, total: total, start: time.Now(), now: time.Now, ownLeft: opt.TimeLeft}
	tty := isTerminal(w)
	if opt.Terminal != nil {
		tty = *opt.Terminal
	}
	if tty {
		r.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionSetItsString(unit),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetPredictTime(!opt.TimeLeft),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
	}
	return r
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Add records n more units done; note (may be empty) says what the step was, in plain lines.
func (r *Reporter) Add(n int, note string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.update(r.done+n, note)
}

// Set records that done units are done in all (a count kept by the caller, as the tokens of
// a run are); note is as Add's, and on a terminal follows the label (with the time left the
// caller told, under Options.TimeLeft).
func (r *Reporter) Set(done int, note string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.update(done, note)
	if r.bar != nil && r.ownLeft && r.hasLeft && r.left > 0 && done < r.total {
		note += ", about " + Span(r.left) + " left"
	}
	if r.bar != nil && note != "" {
		r.bar.Describe(r.label + " (" + note + ")") // drawn at once, with the count just set
	}
}

// SetLeft tells the time left, for the next count's line (Options.TimeLeft).
func (r *Reporter) SetLeft(left time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.left, r.hasLeft = left, true
}

// Println writes a line of its own: on a terminal the bar is cleared first and drawn again at
// the next count.
func (r *Reporter) Println(line string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar != nil {
		_ = r.bar.Clear()
	}
	fmt.Fprintln(r.w, line)
}

// update moves the count to done (r.mu held) and draws it: the bar, or a plain line when a
// second has passed since the last one or the count has just reached the total (that line is
// written once, however often the total is reported).
func (r *Reporter) update(done int, note string) {
	prev := r.done
	r.done = done
	if r.bar != nil {
		_ = r.bar.Set(done)
		return
	}
	now := r.now()
	reached := done >= r.total && prev < r.total
	if !reached && (done >= r.total || now.Sub(r.printed) < time.Second) {
		return
	}
	r.printed = now
	fmt.Fprintln(r.w, r.line(now, note))
}

// line is the plain form: "label: 12/40 images (30%), 3.1 images/s, about 9.0 s left; note".
func (r *Reporter) line(now time.Time, note string) string {
	elapsed := now.Sub(r.start).Seconds()
	s := fmt.Sprintf("%s: %d/%d %s", r.label, r.done, r.total, r.unit)
	if r.total > 0 {
		s += fmt.Sprintf(" (%.0f%%)", 100*float64(r.done)/float64(r.total))
	}
	if elapsed > 0 && r.done > 0 {
		rate := float64(r.done) / elapsed
		s += fmt.Sprintf(", %s %s/s", rateText(rate), r.unit)
		switch left := r.total - r.done; {
		case left <= 0:
		case r.ownLeft:
			if r.hasLeft {
				s += ", about " + Span(r.left) + " left"
			}
		default:
			s += ", about " + Span(time.Duration(float64(left)/rate*float64(time.Second))) + " left"
		}
	}
	if note != "" {
		s += "; " + note
	}
	return s
}

// rateText is a rate with three significant digits, without an exponent: "0.125", "3.1", "2270".
func rateText(rate float64) string {
	if rate >= 1000 {
		return fmt.Sprintf("%.0f", rate)
	}
	return fmt.Sprintf("%.3g", rate)
}

// Count is the units done so far (0 for a nil reporter).
func (r *Reporter) Count() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// Done ends the bar (a newline after it); plain lines need nothing.
func (r *Reporter) Done() {
	if r == nil || r.bar == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.bar.IsFinished() {
		_ = r.bar.Exit()
		fmt.Fprintln(r.w)
	}
}

// Span writes a duration as a person reads it: "40 µs", "2.5 ms", "40 ms", "3.7 s", "37 s", "16 min", "2.5 h".
func Span(d time.Duration) string {
	switch s := d.Seconds(); {
	case s < 0.001:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case s < 0.01:
		return fmt.Sprintf("%.1f ms", s*1000)
	case s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	case s < 10:
		return fmt.Sprintf("%.1f s", s)
	case s < 90:
		return fmt.Sprintf("%.0f s", s)
	case s < 90*60:
		return fmt.Sprintf("%.0f min", s/60)
	default:
		return fmt.Sprintf("%.1f h", s/3600)
	}
}
