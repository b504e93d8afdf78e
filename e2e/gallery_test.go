package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"marspec/api"
	"marspec/server"
)

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// setValue types value into the element sel as a user would (input and change events).
func setValue(t *testing.T, b *browser, sel, value string) {
	t.Helper()
	eval[bool](t, b, fmt.Sprintf(`(() => { const e = document.querySelector(%s); e.value = %s;
		e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`,
		js(sel), js(value)))
}

// withData counts the entries where accepted+rejected > 0: the heatmap cells and chart bars
// that have a rate.
func withData(accepted, rejected []int) int {
	n := 0
	for i := range accepted {
		if accepted[i]+rejected[i] > 0 {
			n++
		}
	}
	return n
}

// imagesRendered is a condition: every image under sel has loaded and has pixels.
func imagesRendered(sel string, want int) string {
	return fmt.Sprintf(`(() => { const imgs = [...document.querySelectorAll(%s)];
		return imgs.length === %d && imgs.every(i => i.complete && i.naturalWidth > 0); })()`, js(sel+" img"), want)
}

// TestGalleryInBrowser loads the gallery in headless Chromium against a server running the
// embedded models: a bad field is reported by name, a speculative job streams to completion
// and its images render, the detail view draws the acceptance heatmap and the per-step chart
// from the API's counts, the compare view runs target-only and speculative side by side, and
// the page fits a phone-width screen.
func TestGalleryInBrowser(t *testing.T) {
	b := newBrowser(t, 1200, 1300) // before the server: skips early when there is no browser
	ts := startServer(t, nil)
	b.do(t, "loading the gallery", chromedp.Navigate(ts.URL+"/"))
	b.waitFor(t, "the page to read the models", `document.body.dataset.ready === "true"`, 30*time.Second)
	if n := eval[int](t, b, `document.querySelectorAll('#class-list input[name="class"]').length`); n != 10 {
		t.Fatalf("class picker has %d classes, want the 10 of the embedded packs", n)
	}
	if got := eval[string](t, b, `document.querySelector('#class-list label:nth-child(8)').textContent.trim()`); got != "Sneaker" {
		t.Fatalf("class 7 is labelled %q, want Sneaker", got)
	}
	// ten classes all show; the search narrows them (TestClassSearch covers a thousand)
	if shown := visibleClasses(t, b); len(shown) != 10 {
		t.Fatalf("picker shows %d of the 10 classes", len(shown))
	}
	b.do(t, "searching sh", chromedp.SendKeys(chromedp.CSS("#class-search"), "sh"))
	if shown := visibleClasses(t, b); !slices.Equal(shown, []string{"T-shirt/top", "Shirt"}) {
		t.Fatalf("searching sh shows %q, want T-shirt/top and Shirt", shown)
	}
	setValue(t, b, "#class-search", "")

	// A value the server refuses: the error names the field and the input is marked.
	setValue(t, b, "#f-cfg", "0.5")
	b.do(t, "submitting cfg 0.5", chromedp.Click(chromedp.CSS("#gen-submit")))
	b.waitFor(t, "the cfg error", `document.querySelector("#gen-error").checkVisibility()`, 30*time.Second)
	if field := eval[string](t, b, `document.querySelector("#gen-error").dataset.field`); field != "cfg" {
		t.Fatalf("error names field %q, want cfg: %s", field, eval[string](t, b, `document.querySelector("#gen-error").textContent`))
	}
	if inv := eval[string](t, b, `document.querySelector("#f-cfg").getAttribute("aria-invalid") || ""`); inv != "true" {
		t.Fatalf("cfg input not marked invalid (aria-invalid %q)", inv)
	}
	b.screenshot(t, "error", "#generate")
	setValue(t, b, "#f-cfg", "")
	// the queue priority is checked the same way (it sits among the advanced options)
	setValue(t, b, "#f-priority", "11")
	b.do(t, "submitting priority 11", chromedp.Click(chromedp.CSS("#gen-submit")))
	b.waitFor(t, "the priority error", `document.querySelector("#gen-error").dataset.field === "priority"`, 30*time.Second)
	setValue(t, b, "#f-priority", "3")

	// A speculative job: Sneaker and Bag, two images each, seed 7 (the default preset runs the
	// target alone, so the mode is chosen), at int8 from the precisions the packs list.
	if opts := eval[[]string](t, b, `[...document.querySelectorAll("#f-precision option")].map((o) => o.textContent)`); !slices.Equal(opts, []string{"default (fp32)", "fp32", "int8"}) {
		t.Errorf("precision choices %q, want the default (fp32), fp32 and int8", opts)
	}
	setValue(t, b, "#f-precision", "int8")
	setValue(t, b, "#f-mode", "spec")
	eval[bool](t, b, `(() => { for (const c of document.querySelectorAll('#class-list input')) c.checked = c.value === "7" || c.value === "8"; return true; })()`)
	setValue(t, b, "#f-n", "2")
	setValue(t, b, "#f-seed", "7")
	b.do(t, "submitting the job", chromedp.Click(chromedp.CSS("#gen-submit")))
	b.waitFor(t, "the job to finish", `["succeeded", "failed", "cancelled"].includes(document.querySelector("#live").dataset.status)`, 3*time.Minute)
	id := eval[string](t, b, `document.querySelector("#live").dataset.job`)
	if st := eval[string](t, b, `document.querySelector("#live").dataset.status`); st != api.StatusSucceeded {
		t.Fatalf("job %s ended %s: %s", id, st, eval[string](t, b, `document.querySelector("#live").textContent`))
	}
	g := getGeneration(t, ts.URL, id)
	if g.Settings.Mode != "spec" || g.Settings.Seed != 7 || len(g.Images) != 4 || g.Priority != 3 || g.Settings.Precision != "int8" {
		t.Fatalf("job %s: mode %s seed %d, %d images, priority %d, precision %q; want spec, 7, 4, 3, int8", id, g.Settings.Mode, g.Settings.Seed, len(g.Images), g.Priority, g.Settings.Precision)
	}
	card := fmt.Sprintf(`article.job[data-job="%s"]`, id)
	b.waitFor(t, "the job's priority on its card", `(document.querySelector(`+js(card+" .queue-info")+`) || {}).textContent === "priority 3"`, 30*time.Second)
	b.waitFor(t, "the job's images in the gallery", imagesRendered(card, 4), time.Minute)
	b.waitFor(t, "the streamed images", imagesRendered("#live-images", 4), time.Minute)
	// 28x28 grey images are scaled up to the 84 px tiles (TestFullSizeInGallery: 256x256 ones are not)
	if size := eval[[]int](t, b, `(() => { const i = document.querySelector(`+js(card+" .tile img")+`); return [i.naturalWidth, i.clientWidth]; })()`); size[0] != 28 || size[1] != 84 {
		t.Errorf("tile image natural width %d shown %d; want 28 shown 84", size[0], size[1])
	}
	labels := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll(%s)].map(e => e.textContent)`, js(card+" .tile .cls")))
	for i, im := range g.Images {
		if labels[i] != im.ClassName {
			t.Errorf("tile %d labelled %q, the API says %q", i, labels[i], im.ClassName)
		}
	}
	if g.Alpha == nil {
		t.Fatalf("spec job %s has no alpha", id)
	}
	if want, head := fmt.Sprintf("α %.3f", *g.Alpha), eval[string](t, b, `document.querySelector(`+js(card+" .job-head")+`).textContent`); !strings.Contains(head, want) {
		t.Errorf("card header %q lacks %q", head, want)
	}
	// the card offers the job's grid, a row per class with its name, as a download
	href := eval[string](t, b, `(document.querySelector(`+js(card+` a[download]`)+`) || {}).getAttribute?.("href") || ""`)
	if href != g.Links.Grid {
		t.Errorf("card's grid link %q, the API's %q", href, g.Links.Grid)
	}
	if resp, err := http.Get(ts.URL + href); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("grid download %s: %v %v", href, resp, err)
	} else {
		resp.Body.Close()
	}
	b.screenshot(t, "generate", "#generate")
	b.screenshot(t, "gallery", card)

	// The detail view of the first image: heatmap cells and per-step bars where the API
	// reports verified drafts, for the image and then summed over the job.
	first := g.Images[0]
	b.do(t, "opening the first image", chromedp.Click(chromedp.CSS(card+" .tile .thumb")))
	b.waitFor(t, "the detail dialog", `document.querySelector("#detail").open && document.querySelector("#heat-canvas").dataset.cells === "49"`, 30*time.Second)
	st := first.Stats
	if st == nil {
		t.Fatalf("image %s has no statistics", first.ID)
	}
	if got, want := eval[string](t, b, `document.querySelector("#heat-canvas").dataset.rated`), fmt.Sprint(withData(st.AcceptedAtPos, st.RejectedAtPos)); got != want {
		t.Errorf("heatmap rates %s positions, the API has drafts verified at %s", got, want)
	}
	if got, want := eval[string](t, b, `document.querySelector("#alpha-canvas").dataset.steps`), fmt.Sprint(withData(st.AcceptedAtStep, st.RejectedAtStep)); got != want {
		t.Errorf("alpha chart has %s steps, the API has drafts verified at %s", got, want)
	}
	b.screenshot(t, "detail", "#detail")
	setValue(t, b, "#detail-scope", "job")
	acc, rej := make([]int, len(st.AcceptedAtPos)), make([]int, len(st.RejectedAtPos))
	for _, im := range g.Images {
		for i := range acc {
			acc[i] += im.Stats.AcceptedAtPos[i]
			rej[i] += im.Stats.RejectedAtPos[i]
		}
	}
	if got, want := eval[string](t, b, `document.querySelector("#heat-canvas").dataset.rated`), fmt.Sprint(withData(acc, rej)); got != want {
		t.Errorf("job heatmap rates %s positions, the API's summed counts have %s", got, want)
	}
	b.screenshot(t, "detail-job", "#detail")
	b.do(t, "closing the detail", chromedp.Click(chromedp.CSS("#detail-close")))

	// The compare view: one Sneaker, seed 3: the target at one token per step, the default
	// preset, then speculative; the summary quotes the speedup against both.
	setValue(t, b, "#c-class", "7")
	setValue(t, b, "#c-n", "1")
	setValue(t, b, "#c-seed", "3")
	b.do(t, "running the comparison", chromedp.Click(chromedp.CSS("#cmp-submit")))
	b.waitFor(t, "both compare jobs", `["done", "failed"].includes(document.querySelector("#cmp-result").dataset.state)`, 3*time.Minute)
	if state := eval[string](t, b, `document.querySelector("#cmp-result").dataset.state`); state != "done" {
		t.Fatalf("compare %s: %s", state, eval[string](t, b, `document.querySelector("#cmp-error").textContent`))
	}
	for _, c := range []struct{ role, mode, preset string }{{"target", "target", ""}, {"preset", "target", "fast"}, {"spec", "spec", ""}} {
		role := c.role
		col := fmt.Sprintf(`#cmp-result .cmp-col[data-role="%s"]`, role)
		b.waitFor(t, role+" images", imagesRendered(col, 1), time.Minute)
		jid := eval[string](t, b, fmt.Sprintf(`document.querySelector(%s).dataset.job`, js(col)))
		cg := getGeneration(t, ts.URL, jid)
		if cg.Settings.Mode != c.mode || cg.Settings.Preset != c.preset || cg.Settings.Seed != 3 || cg.Settings.Classes[0] != 7 || cg.Status != api.StatusSucceeded {
			t.Errorf("%s column shows job %s: mode %s, preset %q, seed %d, classes %v, %s", role, jid, cg.Settings.Mode, cg.Settings.Preset, cg.Settings.Seed, cg.Settings.Classes, cg.Status)
		}
		shown := eval[string](t, b, fmt.Sprintf(`document.querySelector(%s).dataset.seconds`, js(col+" .cmp-time")))
		if want := fmt.Sprint(cg.Seconds); shown != want || cg.Seconds <= 0 {
			t.Errorf("%s column shows %s s, the API measured %v s", role, shown, cg.Seconds)
		}
	}
	if sum := eval[string](t, b, `document.querySelector("#cmp-result .cmp-summary").textContent`); !strings.Contains(sum, "one token per step") || !strings.Contains(sum, "the fast preset") {
		t.Errorf("compare summary %q does not quote the speedup against both baselines", sum)
	}
	b.screenshot(t, "compare", "#compare")
	eval[bool](t, b, `(() => { window.scrollTo(0, 0); return true; })()`)
	b.screenshot(t, "overview", "")

	// A phone-width screen: nothing wider than the viewport.
	b.do(t, "narrowing the viewport", chromedp.EmulateViewport(390, 844), chromedp.Navigate(ts.URL+"/"))
	b.waitFor(t, "the page at 390 px", `document.body.dataset.ready === "true" && document.querySelectorAll("article.job").length >= 3`, 30*time.Second)
	b.waitFor(t, "the gallery images at 390 px", `[...document.querySelectorAll("article.job img")].every(i => i.complete && i.naturalWidth > 0)`, 30*time.Second)
	if w := eval[[]int](t, b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
		t.Errorf("page is %d px wide in a %d px viewport", w[0], w[1])
	}
	b.screenshot(t, "narrow", "")
	if errs := b.jsErrors(); len(errs) > 0 {
		t.Errorf("the page threw: %v", errs)
	}
}

// TestGalleryAsksForToken: with an API token configured, a submit without it is refused (401),
// the page then offers the token field, and the same submit with the token runs.
func TestGalleryAsksForToken(t *testing.T) {
	b := newBrowser(t, 1000, 800)
	ts := startServer(t, func(c *server.Config) { c.Token = "s3cret" })
	b.do(t, "loading the gallery", chromedp.Navigate(ts.URL+"/"))
	b.waitFor(t, "the page to read the models", `document.body.dataset.ready === "true"`, 30*time.Second)
	if eval[bool](t, b, `document.querySelector("#token-box").checkVisibility()`) {
		t.Fatal("token field shown before the server asked for one")
	}
	// the preset control lists the running pack's presets, each titled with its provenance
	if title := eval[string](t, b, `document.querySelector('#f-preset option[value="fast"]').title`); !strings.Contains(title, "measured: frontier run") {
		t.Errorf("the fast preset's title %q does not say where it comes from", title)
	}
	setValue(t, b, "#f-n", "1")
	setValue(t, b, "#f-preset", "fast") // the target alone, 7 AR steps: the quickest job
	b.do(t, "submitting without the token", chromedp.Click(chromedp.CSS("#gen-submit")))
	b.waitFor(t, "the refusal", `document.querySelector("#gen-error").checkVisibility()`, 30*time.Second)
	if msg := eval[string](t, b, `document.querySelector("#gen-error").textContent`); !strings.Contains(msg, "token") {
		t.Fatalf("refusal says %q, want it to mention the token", msg)
	}
	if !eval[bool](t, b, `document.querySelector("#token-box").checkVisibility()`) {
		t.Fatal("token field still hidden after a 401")
	}
	setValue(t, b, "#token", "s3cret")
	b.do(t, "submitting with the token", chromedp.Click(chromedp.CSS("#gen-submit")))
	b.waitFor(t, "the job to finish", `["succeeded", "failed", "cancelled"].includes(document.querySelector("#live").dataset.status)`, 3*time.Minute)
	if st := eval[string](t, b, `document.querySelector("#live").dataset.status`); st != api.StatusSucceeded {
		t.Fatalf("job ended %s: %s", st, eval[string](t, b, `document.querySelector("#live").textContent`))
	}
	b.waitFor(t, "the image", imagesRendered("#live-images", 1), time.Minute)
	if errs := b.jsErrors(); len(errs) > 0 {
		t.Errorf("the page threw: %v", errs)
	}
}

// TestGalleryWithNamedKeys: on a server with --keys the gallery asks for a key, then lists
// that key's jobs only, with the key's name and the job's expiry on each, and their images
// load (the key cookie: an <img> sends no header); an admin key gets a key filter.
func TestGalleryWithNamedKeys(t *testing.T) {
	b := newBrowser(t, 1200, 1000)
	const aliceKey, bobKey, opsKey = "alice-secret-0123456789", "bob-secret-0123456789ab", "ops-secret-0123456789ab"
	ts := startServer(t, func(c *server.Config) {
		c.Retain = time.Hour
		c.APIKeys = []server.APIKey{{Name: "alice", Secret: aliceKey}, {Name: "bob", Secret: bobKey}, {Name: "ops", Secret: opsKey, Admin: true}}
	})
	keep := int64(600)
	for _, secret := range []string{aliceKey, bobKey} {
		c, err := api.NewClient(ts.URL, secret, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"7"}, N: 1, Preset: "fast", ExpiresIn: &keep}, time.Minute)
		if err != nil || g.Status != api.StatusSucceeded {
			t.Fatalf("job of %s: %+v %v", secret[:3], g, err)
		}
	}
	b.do(t, "loading the gallery", chromedp.Navigate(ts.URL+"/"))
	b.waitFor(t, "the page to read the models", `document.body.dataset.ready === "true"`, 30*time.Second)
	b.waitFor(t, "the key field", `document.querySelector("#token-box").checkVisibility()`, 30*time.Second)
	setValue(t, b, "#token", aliceKey)
	b.waitFor(t, "alice's job", `document.querySelectorAll("#jobs article.job").length === 1`, 30*time.Second)
	if key := eval[string](t, b, `document.querySelector("#jobs article.job").dataset.key`); key != "alice" {
		t.Fatalf("alice's gallery shows a job of %q", key)
	}
	if exp := eval[string](t, b, `document.querySelector("#jobs .expiry").textContent`); exp != "expires in 10 min" {
		t.Errorf("the job's expiry reads %q", exp)
	}
	b.waitFor(t, "alice's image", imagesRendered("#jobs article.job .grid", 1), 30*time.Second)
	if eval[bool](t, b, `document.querySelector("#g-key-box").checkVisibility()`) {
		t.Error("a key that is not an admin is offered the key filter")
	}
	setValue(t, b, "#token", opsKey)
	b.waitFor(t, "the key filter", `document.querySelector("#g-key-box").checkVisibility() && document.querySelectorAll("#g-key option").length === 4`, 30*time.Second)
	b.waitFor(t, "every key's jobs", `document.querySelectorAll("#jobs article.job").length === 2`, 30*time.Second)
	setValue(t, b, "#g-key", "bob")
	b.waitFor(t, "bob's job alone", `[...document.querySelectorAll("#jobs article.job")].map(a => a.dataset.key).join() === "bob"`, 30*time.Second)
	if errs := b.jsErrors(); len(errs) > 0 {
		t.Errorf("the page threw: %v", errs)
	}
}
