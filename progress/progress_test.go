package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestPlainLinesAreThrottledAndEndWithTheTotal(t *testing.T) {
	var buf bytes.Buffer
	no := false
	r := New(&buf, "generate", "images", 40, Options{Terminal: &no})
	clock := r.start
	r.now = func() time.Time { return clock }
	clock = clock.Add(2 * time.Second)
	r.Add(10, "batch 1 of 4") // printed: a second has passed since none was
	clock = clock.Add(200 * time.Millisecond)
	r.Add(10, "batch 2 of 4") // within a second of the last line: skipped
	clock = clock.Add(2 * time.Second)
	r.Add(20, "") // the last: always printed
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), buf.String())
	}
	if want := "generate: 10/40 images (25%), 5 images/s, about 6.0 s left; batch 1 of 4"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if !strings.HasPrefix(lines[1], "generate: 40/40 images (100%)") || strings.Contains(lines[1], "left") {
		t.Errorf("last line %q", lines[1])
	}
	if strings.Contains(buf.String(), "\r") {
		t.Error("plain output holds a carriage return")
	}
}

func TestQuietAndNilReportersWriteNothing(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf, "eval", "chunks", 3, Options{Quiet: true})
	r.Add(1, "x")
	r.Done()
	if buf.Len() != 0 || r != nil {
		t.Fatalf("quiet reporter wrote %q", buf.String())
	}
}

func TestTerminalBarShowsCountAndRate(t *testing.T) {
	var buf bytes.Buffer
	yes := true
	r := New(&buf, "fid", "images", 4, Options{Terminal: &yes})
	for range 4 {
		r.Add(1, "")
		time.Sleep(110 * time.Millisecond) // past the bar's redraw throttle
	}
	r.Done()
	out := buf.String()
	if !strings.Contains(out, "4/4") || !strings.Contains(out, "images/s") || !strings.Contains(out, "\r") {
		t.Fatalf("bar output %q lacks the count, the rate or redraws", out)
	}
}

// Set moves a count the caller keeps; the total's line is written once however often the
// total is reported, and a line of its own goes between the counts.
func TestSetWritesTheTotalOnce(t *testing.T) {
	var buf bytes.Buffer
	no := false
	r := New(&buf, "generate", "tokens", 12, Options{Terminal: &no})
	clock := r.start
	r.now = func() time.Time { return clock }
	clock = clock.Add(time.Second)
	r.Set(3, "AR step 1/4")
	r.Println("AR step 1/4 took 1.0 s: about 4.0 s for this image")
	clock = clock.Add(time.Second)
	r.Set(12, "AR step 4/4")
	clock = clock.Add(time.Second)
	r.Set(12, "AR step 4/4")
	want := "generate: 3/12 tokens (25%), 3 tokens/s, about 3.0 s left; AR step 1/4\n" +
		"AR step 1/4 took 1.0 s: about 4.0 s for this image\n" +
		"generate: 12/12 tokens (100%), 6 tokens/s; AR step 4/4\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// Under Options.TimeLeft a line says the time left its caller told, not the count's: units
// of unequal cost (3 of 12 tokens in 1 s would leave 3 s at the count's rate).
func TestTheCallersTimeLeft(t *testing.T) {
	var buf bytes.Buffer
	no := false
	r := New(&buf, "generate", "tokens", 12, Options{Terminal: &no, TimeLeft: true})
	clock := r.start
	r.now = func() time.Time { return clock }
	clock = clock.Add(time.Second)
	r.Set(1, "AR step 1/4") // not told yet: no time left
	clock = clock.Add(time.Second)
	r.SetLeft(40 * time.Second)
	r.Set(3, "AR step 2/4")
	want := "generate: 1/12 tokens (8%), 1 tokens/s; AR step 1/4\n" +
		"generate: 3/12 tokens (25%), 1.5 tokens/s, about 40 s left; AR step 2/4\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// On a terminal, the caller's time left follows the note in the bar's description.
func TestTerminalBarShowsTheCallersTimeLeft(t *testing.T) {
	var buf bytes.Buffer
	yes := true
	r := New(&buf, "generate", "tokens", 4, Options{Terminal: &yes, TimeLeft: true})
	r.SetLeft(40 * time.Second)
	r.Set(1, "AR step 1/4")
	time.Sleep(110 * time.Millisecond) // past the bar's redraw throttle
	r.Set(2, "AR step 2/4")
	r.Done()
	if out := buf.String(); !strings.Contains(out, ", about 40 s left)") {
		t.Errorf("bar output %q lacks the time left", out)
	}
}
