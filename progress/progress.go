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
}

// Options choose where and how a Reporter writes.
type Options struct {
	Quiet bool
	// Terminal forces the bar (true) or plain lines (false); nil asks whether w is a terminal.
	Terminal *bool
}

// New starts a reporter of total units (images, chunks, features) named by label on w.
func New(w io.Writer, label, unit string, total int, opt Options) *Reporter {
	if opt.Quiet || w == nil {
		return nil
	}
	r := &Reporter{w: w, label: label, unit: unit, total: total, start: time.Now(), now: time.Now}
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
			progressbar.OptionSetPredictTime(true),
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
	r.done += n
	if r.bar != nil {
		_ = r.bar.Add(n)
		return
	}
	now := r.now()
	if r.done < r.total && now.Sub(r.printed) < time.Second {
		return
	}
	r.printed = now
	fmt.Fprintln(r.w, r.line(now, note))
}

// line is the plain form: "label: 12/40 images (30%), 3.1 images/s, about 9s left; note".
func (r *Reporter) line(now time.Time, note string) string {
	elapsed := now.Sub(r.start).Seconds()
	s := fmt.Sprintf("%s: %d/%d %s", r.label, r.done, r.total, r.unit)
	if r.total > 0 {
		s += fmt.Sprintf(" (%.0f%%)", 100*float64(r.done)/float64(r.total))
	}
	if elapsed > 0 && r.done > 0 {
		rate := float64(r.done) / elapsed
		s += fmt.Sprintf(", %.3g %s/s", rate, r.unit)
		if left := r.total - r.done; left > 0 {
			s += ", about " + time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second).String() + " left"
		}
	}
	if note != "" {
		s += "; " + note
	}
	return s
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
