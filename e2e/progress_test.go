package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestProgressText: the live label and the compare columns write a running job's progress
// with its rate and time left from the API's tokens_per_second and seconds_left, and without
// them (queued, or nothing decoded yet) only the counts.
func TestProgressText(t *testing.T) {
	b := newBrowser(t, 1000, 800)
	ts := startThousand(t)
	b.do(t, "loading the gallery", chromedp.Navigate(ts.URL+"/"))
	b.waitFor(t, "the page to read the models", `document.body.dataset.ready === "true"`, 30*time.Second)
	for _, c := range []struct{ progress, want string }{
		{`{images_done: 1, images_total: 4, tokens_done: 300, tokens_total: 1024, fraction: 0.29, tokens_per_second: 31.54, seconds_left: 2220}`,
			"1/4 images, 300/1024 tokens · 31.5 tokens/s, about 37 min left"},
		{`{images_done: 0, images_total: 1, tokens_done: 3, tokens_total: 256, fraction: 0.01, tokens_per_second: 0.2718, seconds_left: 930.8}`,
			"0/1 images, 3/256 tokens · 0.272 tokens/s, about 16 min left"},
		{`{images_done: 0, images_total: 2, tokens_done: 0, tokens_total: 512, fraction: 0}`, "0/2 images, 0/512 tokens"},
	} {
		if got := eval[string](t, b, "fmtProgress("+c.progress+")"); got != c.want {
			t.Errorf("progress %s reads %q, want %q", c.progress, got, c.want)
		}
	}
	if errs := b.jsErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
