package e2e

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"marspec/api"
	"marspec/generation"
	"marspec/server"
	"marspec/store"
	"marspec/web"
)

// startThousand serves the analytic test models under MAR's 1,000 classes (placeholder names
// with three real ones among them, as a pack exported with names has): milliseconds per image,
// so the class picker is what is tested.
func startThousand(t *testing.T) *httptest.Server {
	t.Helper()
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("class_%03d", i)
	}
	names[281], names[282], names[285] = "tabby cat", "tiger cat", "Egyptian cat"
	models, cat := generation.TestModels()
	for _, m := range models {
		m.Manifest.Classes = names
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Drain = 0
	srv := server.New(cfg, server.Deps{Catalog: cat, Models: models, Store: st, UI: web.FS, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()); ts.Close(); st.Close() })
	return ts
}

// visibleClasses is the names of the chips the picker shows, in order.
func visibleClasses(t *testing.T, b *browser) []string {
	t.Helper()
	return eval[[]string](t, b, `[...document.querySelectorAll("#class-list label")].filter(l => !l.hidden).map(l => l.textContent.trim())`)
}

// TestClassSearch: among 1,000 classes the picker shows a readable part, filters as the user
// types (by name or id), and works from the keyboard: Enter picks the first match, ArrowDown
// enters the list, arrows move, Space picks, Escape returns to the search box; the job then
// asks for exactly the picked classes.
func TestClassSearch(t *testing.T) {
	b := newBrowser(t, 1200, 1000)
	ts := startThousand(t)
	b.do(t, "loading the gallery", chromedp.Navigate(ts.URL+"/"))
	b.waitFor(t, "the page to read the models", `document.body.dataset.ready === "true"`, 30*time.Second)
	if n := eval[int](t, b, `document.querySelectorAll('#class-list input[name="class"]').length`); n != 1000 {
		t.Fatalf("picker has %d classes, want 1000", n)
	}
	// class 0 (picked by default) and the first 60 others
	if shown := visibleClasses(t, b); len(shown) != 61 || shown[0] != "class_000" {
		t.Fatalf("unfiltered picker shows %d chips starting %q; want 61 from class_000", len(shown), shown[:min(3, len(shown))])
	}
	if note := eval[string](t, b, `document.querySelector("#class-count").textContent`); !strings.Contains(note, "1 picked · 1000 classes, 60 shown: type to narrow") {
		t.Errorf("count line %q", note)
	}

	b.do(t, "typing cat", chromedp.SendKeys(chromedp.CSS("#class-search"), "cat"))
	if shown := visibleClasses(t, b); !slices.Equal(shown, []string{"class_000", "tabby cat", "tiger cat", "Egyptian cat"}) {
		t.Fatalf("after typing cat the picker shows %q; want the picked class_000 and the three cats", shown)
	}
	if note := eval[string](t, b, `document.querySelector("#class-count").textContent`); !strings.Contains(note, "3 of 1000 classes match") {
		t.Errorf("count line %q after typing cat", note)
	}
	b.do(t, "Enter in the search box", chromedp.KeyEvent(kb.Enter))
	b.do(t, "into the list and along it", chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight))
	if focused := eval[string](t, b, `document.activeElement.parentElement.textContent.trim()`); focused != "tiger cat" {
		t.Fatalf("after ArrowDown and two ArrowRight the focus is on %q, want tiger cat", focused)
	}
	b.do(t, "Space on tiger cat, then Escape", chromedp.KeyEvent(" "), chromedp.KeyEvent(kb.Escape))
	if id := eval[string](t, b, `document.activeElement.id`); id != "class-search" {
		t.Errorf("Escape left the focus on #%s, want the search box", id)
	}
	picked := eval[[]int](t, b, `[...document.querySelectorAll('#class-list input:checked')].map(i => Number(i.value))`)
	if !slices.Equal(picked, []int{0, 281, 282}) {
		t.Fatalf("picked %v, want [0 281 282] (the default, Enter's first match, Space's)", picked)
	}

	// by id, and nothing
	setValue(t, b, "#class-search", "")
	b.do(t, "typing an id", chromedp.SendKeys(chromedp.CSS("#class-search"), "999"))
	if shown := visibleClasses(t, b); !slices.Contains(shown, "class_999") || len(shown) != 4 {
		t.Errorf("searching 999 shows %q; want the three picked and class_999", shown)
	}
	setValue(t, b, "#class-search", "")
	b.do(t, "typing nonsense", chromedp.SendKeys(chromedp.CSS("#class-search"), "zebra"))
	if note := eval[string](t, b, `document.querySelector("#class-count").textContent`); !strings.Contains(note, "3 picked · 0 of 1000 classes match") {
		t.Errorf("count line %q for zebra", note)
	}

	// the job asks for what was picked
	setValue(t, b, "#f-n", "1")
	setValue(t, b, "#f-mode", "target")
	if got := eval[[]string](t, b, `[...document.querySelectorAll("#f-sampler option")].map(o => o.value)`); !slices.Equal(got, []string{"", "ddpm", "ddim", "dpmpp-2m", "dpmpp-2m-sde"}) {
		t.Errorf("sampler choices %q; want the default and the pack's four training-free samplers", got)
	}
	setValue(t, b, "#f-sampler", "ddim")
	setValue(t, b, "#f-eta", "1")
	b.do(t, "submitting", chromedp.Click(chromedp.CSS("#gen-submit")))
	b.waitFor(t, "the job to finish", `["succeeded", "failed", "cancelled"].includes(document.querySelector("#live").dataset.status)`, time.Minute)
	g := getGeneration(t, ts.URL, eval[string](t, b, `document.querySelector("#live").dataset.job`))
	if g.Status != api.StatusSucceeded || !slices.Equal(g.Settings.Classes, []int{0, 281, 282}) || len(g.Images) != 3 || g.Images[2].ClassName != "tiger cat" {
		t.Errorf("job %s: %s, classes %v; want succeeded with 0, 281, 282", g.ID, g.Status, g.Settings.Classes)
	}
	if g.Settings.Sampler != "ddim" || g.Settings.Eta != 1 {
		t.Errorf("job %s ran sampler %q eta %g; the form asked for ddim, eta 1", g.ID, g.Settings.Sampler, g.Settings.Eta)
	}
	if errs := b.jsErrors(); len(errs) > 0 {
		t.Errorf("the page threw: %v", errs)
	}
}
