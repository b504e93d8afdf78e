package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds the browser: $MARSPEC_CHROMIUM, then chromium on PATH, then Debian's
// /usr/bin/chromium. Without one the test is skipped, unless MARSPEC_REQUIRE_BROWSER=1 (CI),
// where a missing browser is a failure.
func chromiumPath(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("MARSPEC_CHROMIUM")}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			candidates = append(candidates, p)
		}
	}
	candidates = append(candidates, "/usr/bin/chromium")
	for _, p := range candidates {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	msg := "no Chromium found (set MARSPEC_CHROMIUM, or `apt-get install chromium`)"
	if os.Getenv("MARSPEC_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + "; MARSPEC_REQUIRE_BROWSER=1 makes this a failure")
	}
	t.Skip(msg)
	return ""
}

// browser is a headless Chromium tab and the JavaScript errors its page has thrown.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// newBrowser starts a headless Chromium with a fresh profile, no network of its own (no
// sync, updates or background requests), and opens one tab.
func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	b := &browser{ctx: ctx}
	if err := chromedp.Listen(ctx, b.record); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return b
}

// record keeps uncaught exceptions and console.error calls: a page that throws fails the test.
func (b *browser) record(ev any) {
	var msg string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		parts := []string{"console.error:"}
		for _, a := range e.Args {
			parts = append(parts, string(a.Value)+a.Description)
		}
		msg = strings.Join(parts, " ")
	default:
		return
	}
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

func (b *browser) jsErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// do runs actions, failing the test with what was being done.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		t.Fatalf("%s: %v (page errors: %v)", what, err, b.jsErrors())
	}
}

// eval evaluates a JavaScript expression into T.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v (page errors: %v)", expr, err, b.jsErrors())
	}
	return v
}

// waitFor polls a JavaScript condition until it holds; the bound only keeps a broken page from
// hanging the test (nothing is timed).
func (b *browser) waitFor(t *testing.T, what, cond string, bound time.Duration) {
	t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](cond,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(bound)))
	if err != nil {
		t.Fatalf("waiting for %s (%s): %v (page errors: %v)", what, cond, err, b.jsErrors())
	}
}

// screenshot saves the element sel (or the viewport when sel is "") as
// docs/screenshots/name.png when MARSPEC_SCREENSHOTS=1.
func (b *browser) screenshot(t *testing.T, name, sel string) {
	t.Helper()
	if os.Getenv("MARSPEC_SCREENSHOTS") != "1" {
		return
	}
	var png []byte
	var err error
	if sel == "" {
		png, err = chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	} else {
		png, err = chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	}
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join("..", "docs", "screenshots", name+".png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}
