package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"marspec/api"
	"marspec/server"
)

const python = "/usr/bin/python3"

// ciPacks makes the ci_target/ci_draft random packs (MAR-B's token layout and a KL-16-shaped
// decoder, a few MB) with scripts/packs/make_random_packs.py. Without python3-torch the test is
// skipped, unless MARSPEC_REQUIRE_TORCH=1 (CI), where that is a failure.
func ciPacks(t *testing.T) (target, draft string) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import torch, onnx").CombinedOutput(); err != nil {
		msg := "needs " + python + " with torch and onnx (apt-get install python3-torch python3-onnx): " + strings.TrimSpace(string(out))
		if os.Getenv("MARSPEC_REQUIRE_TORCH") == "1" {
			t.Fatal(msg + " (MARSPEC_REQUIRE_TORCH=1)")
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	cmd := exec.Command(python, "make_random_packs.py", "--models", "ci_target,ci_draft", "--vae", "ci_kl16", "--out", dir)
	cmd.Dir = filepath.Join("..", "scripts", "packs")
	cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make_random_packs.py: %v\n%s", err, out)
	}
	return filepath.Join(dir, "ci-target"), filepath.Join(dir, "ci-draft")
}

// TestFullSizeInGallery: a 256x256 colour image (MAR-B's layout at CI size) is shown at its
// natural size in the live strip and the gallery, not squeezed into the 84 px tiles that
// Fashion-MNIST's 28x28 images are scaled up to; a speculative one's detail maps its 16x16
// positions; and the images shrink to fit a phone-width screen.
func TestFullSizeInGallery(t *testing.T) {
	b := newBrowser(t, 1200, 1300)
	target, draft := ciPacks(t)
	ts := startServer(t, func(c *server.Config) { c.Target, c.Draft = target, draft })
	b.do(t, "loading the gallery", chromedp.Navigate(ts.URL+"/"))
	b.waitFor(t, "the page to read the models", `document.body.dataset.ready === "true"`, 30*time.Second)
	if line := eval[string](t, b, `document.querySelector("#models-line").textContent`); !strings.Contains(line, "256×256×3") {
		t.Errorf("models line %q does not give the 256×256×3 image size", line)
	}
	b.do(t, "typing 207", chromedp.SendKeys(chromedp.CSS("#class-search"), "207"))
	eval[bool](t, b, `(() => { for (const c of document.querySelectorAll('#class-list input')) c.checked = c.value === "207"; return true; })()`)
	setValue(t, b, "#f-n", "1")
	setValue(t, b, "#f-mode", "target")
	setValue(t, b, "#f-num_iter", "4")
	setValue(t, b, "#f-steps", "3")
	b.do(t, "submitting", chromedp.Click(chromedp.CSS("#gen-submit")))
	b.waitFor(t, "the job to finish", `["succeeded", "failed", "cancelled"].includes(document.querySelector("#live").dataset.status)`, time.Minute)
	id := eval[string](t, b, `document.querySelector("#live").dataset.job`)
	g := getGeneration(t, ts.URL, id)
	if g.Status != api.StatusSucceeded || len(g.Images) != 1 || g.Images[0].Class != 207 {
		t.Fatalf("job %s: %s, %d images; want one of class 207", id, g.Status, len(g.Images))
	}
	card := `article.job[data-job="` + id + `"]`
	b.waitFor(t, "the image in the gallery", imagesRendered(card, 1), 30*time.Second)
	b.waitFor(t, "the streamed image", imagesRendered("#live-images", 1), 30*time.Second)
	for _, sel := range []string{card + " .tile img", "#live-images img"} {
		size := eval[[]int](t, b, `(() => { const i = document.querySelector(`+js(sel)+`); return [i.naturalWidth, i.naturalHeight, i.clientWidth, i.clientHeight]; })()`)
		if size[0] != 256 || size[1] != 256 || size[2] != 256 || size[3] != 256 {
			t.Errorf("%s: natural %dx%d shown %dx%d; want 256x256 at its size", sel, size[0], size[1], size[2], size[3])
		}
	}
	// an image an earlier pack made (28x28) among this pack's is sized by what it is once loaded
	eval[bool](t, b, `(() => { const c = document.createElement("canvas"); c.width = c.height = 28;
		const i = pictures.img({ src: c.toDataURL(), id: "old-pack" }, 84); document.querySelector("#live-images").appendChild(i); return true; })()`)
	b.waitFor(t, "the 28x28 image", `(() => { const i = document.querySelector("#old-pack"); return i.complete && i.naturalWidth === 28; })()`, 10*time.Second)
	if got := eval[[]any](t, b, `(() => { const i = document.querySelector("#old-pack"); return [i.className, i.clientWidth]; })()`); got[0] != "scaled" || got[1] != float64(84) {
		t.Errorf("a 28x28 image on a 256x256 pack's page: class %v, %v px wide; want scaled to 84", got[0], got[1])
	}

	// a speculative image's detail: the acceptance map over MAR's 16x16 token grid
	client, err := api.NewClient(ts.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := 3
	spec, err := client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"class_207"}, N: 1, Mode: "spec", Steps: &steps, Gamma: "4"}, time.Minute)
	if err != nil || spec.Status != api.StatusSucceeded {
		t.Fatalf("spec job: %+v, %v", spec, err)
	}
	specCard := `article.job[data-job="` + spec.ID + `"]`
	b.do(t, "reloading", chromedp.Navigate(ts.URL+"/"))
	b.waitFor(t, "the spec image in the gallery", imagesRendered(specCard, 1), 30*time.Second)
	b.do(t, "opening the spec image", chromedp.Click(chromedp.CSS(specCard+" .tile .thumb")))
	b.waitFor(t, "its heatmap over 16x16 positions", `document.querySelector("#detail").open && document.querySelector("#heat-canvas").dataset.cells === "256"`, 30*time.Second)
	b.do(t, "closing the detail", chromedp.Click(chromedp.CSS("#detail-close")))

	b.do(t, "narrowing the viewport", chromedp.EmulateViewport(390, 844), chromedp.Navigate(ts.URL+"/"))
	b.waitFor(t, "the page at 390 px", `document.body.dataset.ready === "true" && document.querySelectorAll("article.job img").length === 2`, 30*time.Second)
	b.waitFor(t, "the image at 390 px", imagesRendered(card, 1), 30*time.Second)
	if w := eval[[]int](t, b, `[document.documentElement.scrollWidth, window.innerWidth, document.querySelector(`+js(card+" .tile img")+`).clientWidth]`); w[0] > w[1] || w[2] > w[1] || w[2] < 200 {
		t.Errorf("at %d px: page %d px wide, image %d px; want it to fit, not shrunk to a thumbnail", w[1], w[0], w[2])
	}
	if errs := b.jsErrors(); len(errs) > 0 {
		t.Errorf("the page threw: %v", errs)
	}
}
