package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"marspec/generation"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/render"
)

// POST with ?wait= answers with the finished job: the seed it picked, images with statistics,
// PNGs that carry their parameters; GET returns the same job.
func TestGenerateWaitFetchAndImages(t *testing.T) {
	ts := start(t, "", false, nil)
	ctx := t.Context()
	g, err := ts.client.Generate(ctx, api.GenerateRequest{Class: api.Classes{"trouser", "0"}, N: 2, Mode: "spec"}, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != api.StatusSucceeded || len(g.Images) != 4 || g.Settings.Mode != "spec" || g.Alpha == nil {
		t.Fatalf("job: %+v", g)
	}
	if g.Settings.Seed == 0 || g.Settings.Spec == nil || g.Progress.ImagesDone != 4 || g.Progress.Fraction != 1 {
		t.Errorf("settings or progress: %+v %+v", g.Settings, g.Progress)
	}
	if g.Links.Self != "/v1/generations/"+g.ID || g.Links.Events != g.Links.Self+"/events" {
		t.Errorf("links: %+v", g.Links)
	}
	for i, im := range g.Images {
		if im.Index != i || im.Stats == nil || im.Stats.GridHeight == 0 || len(im.Stats.AcceptedAtPos) == 0 {
			t.Errorf("image %d: %+v", i, im)
		}
		png, err := ts.client.Image(ctx, im.URL)
		if err != nil {
			t.Fatal(err)
		}
		params := render.ReadParameters(png)
		for _, want := range []string{"mode=spec", "seed=" + jsonNum(g.Settings.Seed), "class=" + jsonNum(uint64(im.Class)), "alpha="} {
			if !strings.Contains(params, want) {
				t.Errorf("image %d parameters %q lack %q", i, params, want)
			}
		}
	}
	if g.Images[0].ClassName != "Trouser" || g.Images[2].ClassName != "T-shirt/top" {
		t.Errorf("class names: %q %q", g.Images[0].ClassName, g.Images[2].ClassName)
	}
	again, err := ts.client.Generation(ctx, g.ID)
	if err != nil || again.Status != g.Status || len(again.Images) != 4 || again.Settings.Seed != g.Settings.Seed {
		t.Fatalf("GET: %+v %v", again, err)
	}
	if byID, err := ts.client.Image(ctx, g.Images[1].ID); err != nil || !bytes.HasPrefix(byID, []byte("\x89PNG")) {
		t.Errorf("image by id: %v", err)
	}
}

func jsonNum(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// Without ?wait the answer is 202 with a Location, and the job can be followed by events:
// the current state first, an "image" event per image, then "done".
func TestAcceptedAndEvents(t *testing.T) {
	ts := start(t, "", true, nil)
	a := ts.call(t, "POST", "/v1/generations", `{"class":1,"n":3,"mode":"target","seed":7}`)
	if a.code != http.StatusAccepted || !strings.HasPrefix(a.header.Get("Location"), "/v1/generations/") {
		t.Fatalf("%d %s", a.code, a.body)
	}
	var g api.Generation
	if err := json.Unmarshal(a.body, &g); err != nil || g.Settings.Seed != 7 || len(g.Settings.Classes) != 3 {
		t.Fatalf("%s %v", a.body, err)
	}
	var types []string
	images := 0
	final, err := ts.client.Events(t.Context(), g.ID, func(ev api.Event) error {
		if ev.Type == "generation" {
			ts.gate.release() // the stream is subscribed: let the held job go on
		}
		types = append(types, ev.Type)
		if ev.Type == "image" {
			images++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if types[0] != "generation" || types[len(types)-1] != "done" || final.Status != api.StatusSucceeded || len(final.Images) != 3 {
		t.Fatalf("events %v, final %+v", types, final)
	}
	// The job is held after storing its first image until the stream is subscribed, and the
	// image event is published after the hold: every image arrives as an event.
	if images != 3 {
		t.Errorf("%d image events", images)
	}
	// A finished job's stream is its state and "done" at once.
	var again []string
	if _, err := ts.client.Events(t.Context(), g.ID, func(ev api.Event) error { again = append(again, ev.Type); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(again, ",") != "generation,done" {
		t.Errorf("stream of a finished job: %v", again)
	}
}

// A full queue answers 503 with Retry-After; the server serves again once it drains.
func TestQueueFull(t *testing.T) {
	ts := start(t, "", true, func(c *Config) { c.QueueSize = 1 })
	first, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Mode: "target"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	<-ts.gate.stored // running, held
	a := ts.call(t, "POST", "/v1/generations", `{"class":0}`)
	var body api.ErrorBody
	if a.code != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "5" || json.Unmarshal(a.body, &body) != nil || body.Error == "" {
		t.Fatalf("%d %v %s", a.code, a.header, a.body)
	}
	_, err = ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}}, 0)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 503 || apiErr.RetryAfter != 5*time.Second {
		t.Fatalf("client error: %#v", err)
	}
	ts.gate.release()
	if g := ts.waitEnd(t, first.ID); g.Status != api.StatusSucceeded {
		t.Fatal(g.Status)
	}
	if _, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}, Mode: "target"}, 15*time.Second); err != nil {
		t.Fatalf("after the queue drained: %v", err)
	}
	list, err := ts.client.List(t.Context(), api.ListOptions{})
	if err != nil || list.Total != 2 {
		t.Fatalf("a refused job must not be stored: %+v %v", list, err)
	}
}

// DELETE cancels a running job (202, then "cancelled" with a reason), a second DELETE while
// it is being cancelled is 409, a DELETE of the finished job removes it and its images (204).
func TestCancelAndDelete(t *testing.T) {
	ts := start(t, "", true, nil)
	ctx := t.Context()
	g, err := ts.client.Generate(ctx, api.GenerateRequest{Class: api.Classes{"2"}, N: 8, Mode: "draft"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	<-ts.gate.stored
	got, err := ts.client.Delete(ctx, g.ID)
	if err != nil || got == nil || got.ID != g.ID {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	if _, err := ts.client.Delete(ctx, g.ID); !api.IsStatus(err, http.StatusConflict) {
		t.Fatalf("second cancel: %v", err)
	}
	ts.gate.release()
	end := ts.waitEnd(t, g.ID)
	if end.Status != api.StatusCancelled || end.Error == "" || len(end.Images) == 8 {
		t.Fatalf("cancelled job: %s %q, %d images", end.Status, end.Error, len(end.Images))
	}
	if len(end.Images) == 0 {
		t.Fatal("the image stored before the cancellation is gone")
	}
	url := end.Images[0].URL
	if gone, err := ts.client.Delete(ctx, g.ID); err != nil || gone != nil {
		t.Fatalf("delete: %+v %v", gone, err)
	}
	if _, err := ts.client.Generation(ctx, g.ID); !api.IsStatus(err, http.StatusNotFound) {
		t.Errorf("deleted job: %v", err)
	}
	if _, err := ts.client.Image(ctx, url); !api.IsStatus(err, http.StatusNotFound) {
		t.Errorf("deleted image: %v", err)
	}
	if _, err := ts.client.Delete(ctx, g.ID); !api.IsStatus(err, http.StatusNotFound) {
		t.Errorf("delete twice: %v", err)
	}
}

// The list is paged, newest first, and filters by class (any of a job's classes) and mode.
func TestListPagingAndFilters(t *testing.T) {
	ts := start(t, "", false, nil)
	reqs := []api.GenerateRequest{
		{Class: api.Classes{"0"}, Mode: "target", Seed: seed(1)},
		{Class: api.Classes{"1", "2"}, Mode: "draft", Seed: seed(2)},
		{Class: api.Classes{"pullover"}, Mode: "spec", Seed: seed(3)},
	}
	var ids []string
	for _, r := range reqs {
		g, err := ts.client.Generate(t.Context(), r, 15*time.Second)
		if err != nil || g.Status != api.StatusSucceeded {
			t.Fatalf("%+v %v", g, err)
		}
		ids = append(ids, g.ID)
	}
	page, err := ts.client.List(t.Context(), api.ListOptions{Limit: 2})
	if err != nil || page.Total != 3 || len(page.Generations) != 2 || page.Generations[0].ID != ids[2] || page.Generations[1].ID != ids[1] {
		t.Fatalf("page 1: %+v %v", page, err)
	}
	page, _ = ts.client.List(t.Context(), api.ListOptions{Limit: 2, Offset: 2})
	if page.Total != 3 || len(page.Generations) != 1 || page.Generations[0].ID != ids[0] || len(page.Generations[0].Images) != 1 {
		t.Fatalf("page 2: %+v", page)
	}
	// by cursor: the same order, no count; a bad cursor names the parameter
	var walked []string
	for next, first := "", true; first || next != ""; first = false {
		a := ts.call(t, "GET", "/v1/generations?limit=2&after="+next, "")
		var l api.GenerationList
		if err := json.Unmarshal(a.body, &l); err != nil || a.code != 200 || l.Total != -1 {
			t.Fatalf("cursor page after %q: %d %s", next, a.code, a.body)
		}
		for _, g := range l.Generations {
			walked = append(walked, g.ID)
		}
		next = l.Next
	}
	if !slices.Equal(walked, []string{ids[2], ids[1], ids[0]}) {
		t.Errorf("walked by cursor: %v", walked)
	}
	if a := ts.call(t, "GET", "/v1/generations?after=nonsense", ""); a.code != 400 || !strings.Contains(string(a.body), `"field":"after"`) {
		t.Errorf("bad cursor: %d %s", a.code, a.body)
	}
	for _, c := range []struct {
		o    api.ListOptions
		want []string
	}{
		{api.ListOptions{Class: "Pullover"}, []string{ids[2], ids[1]}},
		{api.ListOptions{Class: "0"}, []string{ids[0]}},
		{api.ListOptions{Mode: "draft"}, []string{ids[1]}},
		{api.ListOptions{Mode: "spec", Class: "1"}, nil},
		{api.ListOptions{Status: "succeeded"}, []string{ids[2], ids[1], ids[0]}},
	} {
		l, err := ts.client.List(t.Context(), c.o)
		if err != nil || l.Total != len(c.want) {
			t.Errorf("%+v: %+v %v", c.o, l, err)
			continue
		}
		for i, g := range l.Generations {
			if g.ID != c.want[i] {
				t.Errorf("%+v: item %d is %s, want %s", c.o, i, g.ID, c.want[i])
			}
		}
	}
}

func TestModelsHealthReadyMetricsOpenAPIAndUI(t *testing.T) {
	ts := start(t, "", false, nil)
	ctx := t.Context()
	m, err := ts.client.Models(ctx)
	if err != nil || len(m.Models) != 2 || m.Models[0].Role != "target" || len(m.Models[0].Classes) != 3 || len(m.Presets) == 0 || len(m.Modes) != 3 {
		t.Fatalf("models: %+v %v", m, err)
	}
	// the test target has no distilled head: its samplers are the training-free ones
	if got := m.Models[0].Samplers; !slices.Equal(got, []string{"ddpm", "ddim", "dpmpp-2m", "dpmpp-2m-sde"}) || m.Models[0].DistilledSteps != nil {
		t.Errorf("target samplers %v, distilled steps %v", got, m.Models[0].DistilledSteps)
	}
	if err := ts.client.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ts.client.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.Generate(ctx, api.GenerateRequest{Class: api.Classes{"0"}, N: 3, Mode: "spec"}, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	text, err := ts.client.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"marspec_queue_depth 0", "marspec_batch_images_count", "marspec_image_alpha_count 3",
		`marspec_job_seconds_count{mode="spec"} 1`, `marspec_images_total{mode="spec"} 3`, `marspec_jobs_total{status="succeeded"} 1`,
		`marspec_http_requests_total{code="200",route="/v1/generations"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	spec, err := ts.client.OpenAPI(ctx)
	if err != nil || !json.Valid(spec) || !bytes.Contains(spec, []byte(`"openapi"`)) {
		t.Fatalf("openapi: %v", err)
	}
	if a := ts.call(t, "GET", "/", ""); a.code != 200 || !bytes.Contains(a.body, []byte("gallery")) {
		t.Errorf("UI: %d %s", a.code, a.body)
	}
	if a := ts.call(t, "GET", "/ui/app.js", ""); a.code != 200 {
		t.Errorf("UI asset: %d", a.code)
	}
	ts.stopping.Store(true)
	if err := ts.client.Ready(ctx); !api.IsStatus(err, http.StatusServiceUnavailable) {
		t.Errorf("readyz while stopping: %v", err)
	}
	ts.stopping.Store(false)
}

// With a token, POST and DELETE need it; reads do not.
func TestAPIToken(t *testing.T) {
	ts := start(t, "", false, func(c *Config) { c.Token = "s3cret" })
	if a := ts.call(t, "POST", "/v1/generations", `{"class":0}`); a.code != http.StatusUnauthorized || !bytes.Contains(a.body, []byte("token")) {
		t.Fatalf("no token: %d %s", a.code, a.body)
	}
	if a := ts.call(t, "POST", "/v1/generations", `{"class":0}`, "Authorization", "Bearer wrong"); a.code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", a.code)
	}
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"0"}, Mode: "target"}, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a := ts.call(t, "GET", "/v1/generations/"+g.ID, ""); a.code != http.StatusOK {
		t.Errorf("read without token: %d", a.code)
	}
	if a := ts.call(t, "DELETE", "/v1/generations/"+g.ID, ""); a.code != http.StatusUnauthorized {
		t.Errorf("delete without token: %d", a.code)
	}
}

// A job merged with others into one running batch gives PNGs byte-identical to the same
// request run alone (the pixels, and the parameters stamped into them).
func TestMergedImagesMatchAlone(t *testing.T) {
	ctx := t.Context()
	req := api.GenerateRequest{Class: api.Classes{"1", "2"}, N: 2, Mode: "target", Seed: seed(11), NumIter: ptr(3)}
	single := start(t, "", false, nil)
	alone, err := single.client.Generate(ctx, req, 15*time.Second)
	if err != nil || alone.Status != api.StatusSucceeded {
		t.Fatalf("%+v %v", alone, err)
	}
	// The scheduler holds the jobs until all four are queued; they then start merged: 6 + 4 + 6
	// of them in the first batch of 16 (a held sink no longer holds the engine: images are
	// stored beside the steps).
	ts := start(t, "", false, func(c *Config) { c.MaxBatch = 16 })
	release := ts.sched.Hold()
	other := api.GenerateRequest{Class: api.Classes{"all"}, N: 2, Mode: "target"}
	first, err := ts.client.Generate(ctx, other, 0)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := ts.client.Generate(ctx, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{first.ID, merged.ID}
	for range 2 {
		g, err := ts.client.Generate(ctx, other, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	release()
	for _, id := range ids {
		if g := ts.waitEnd(t, id); g.Status != api.StatusSucceeded {
			t.Fatalf("%s: %s %s", id, g.Status, g.Error)
		}
	}
	merged, _ = ts.client.Generation(ctx, merged.ID)
	for i := range alone.Images {
		a, _ := single.client.Image(ctx, alone.Images[i].URL)
		b, _ := ts.client.Image(ctx, merged.Images[i].URL)
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("image %d differs between the job alone and merged", i)
		}
	}
	text, _ := ts.client.Metrics(ctx)
	le8, count := metricValue(text, `marspec_batch_images_bucket{le="8"}`), metricValue(text, "marspec_batch_images_count")
	if !(le8 < count) {
		t.Errorf("no engine step had more than 8 images (%v of %v steps had 8 or fewer): the jobs were not merged", le8, count)
	}
}

// metricValue reads one sample of a Prometheus text exposition (-1 if absent).
func metricValue(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return -1
}

func ptr[T any](v T) *T { return &v }

// ?wait shorter than the job answers 202 with the job not finished yet.
func TestWaitBound(t *testing.T) {
	ts := start(t, "", true, nil)
	a := ts.call(t, "POST", "/v1/generations?wait=50ms", `{"class":0,"n":2,"mode":"target"}`)
	var g api.Generation
	if a.code != http.StatusAccepted || json.Unmarshal(a.body, &g) != nil || g.Ended() {
		t.Fatalf("%d %s", a.code, a.body)
	}
	ts.gate.release()
	if end := ts.waitEnd(t, g.ID); end.Status != api.StatusSucceeded {
		t.Fatal(end.Status)
	}
}

// Shutdown refuses new jobs at once and lets a running job finish within the drain time.
func TestShutdownDrainsRunningJobs(t *testing.T) {
	ts := start(t, "", true, func(c *Config) { c.Drain = time.Minute })
	g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"1"}, N: 2, Mode: "target"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	<-ts.gate.stored
	done := make(chan error, 1)
	go func() { done <- ts.Shutdown(context.Background()) }()
	for !ts.stopping.Load() {
		time.Sleep(time.Millisecond)
	}
	if a := ts.call(t, "POST", "/v1/generations", `{"class":0}`); a.code != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Fatalf("POST while draining: %d %s", a.code, a.body)
	}
	ts.gate.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	j, err := ts.store.Job(g.ID)
	if err != nil || j.Status != api.StatusSucceeded {
		t.Fatalf("drained job: %+v %v", j, err)
	}
}

// The grid of a job names its rows by class and carries the job's parameters; a job without
// images and an unknown job are 404s that say why.
func TestJobGrid(t *testing.T) {
	ts := start(t, "", false, nil)
	ctx := t.Context()
	g, err := ts.client.Generate(ctx, api.GenerateRequest{Class: api.Classes{"trouser", "pullover"}, N: 3}, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := ts.call(t, "GET", g.Links.Grid, "")
	if a.code != 200 || a.header.Get("Content-Type") != "image/png" {
		t.Fatalf("grid: %d %s %s", a.code, a.header.Get("Content-Type"), a.body)
	}
	if params := render.ReadParameters(a.body); params != g.Settings.Params {
		t.Errorf("grid parameters %q, want the job's %q", params, g.Settings.Params)
	}
	img, err := png.Decode(bytes.NewReader(a.body))
	if err != nil {
		t.Fatal(err)
	}
	one, err := ts.client.Image(ctx, g.Images[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	cell, err := png.DecodeConfig(bytes.NewReader(one))
	if err != nil {
		t.Fatal(err)
	}
	// 3 columns of cells with 2-pixel gaps, plus the label column; 2 rows. Cells are scaled
	// up by the whole factor that brings a tiny picture's longer side closest to 112 px
	// (generation.LayoutGrid), 18 for the analytic models' 6x1 pictures.
	scale := max(1, 112/max(cell.Width, cell.Height))
	cells := 3*(cell.Width*scale+2) + 2
	if b := img.Bounds(); b.Dy() != 2*(cell.Height*scale+2)+2 || b.Dx() <= cells+30 {
		t.Errorf("grid %dx%d: want 2 rows and a label column beside %d px of cells", b.Dx(), b.Dy(), cells)
	}
	// a running job's grid has what is finished; a job cancelled in the queue has nothing
	held := start(t, "", true, nil)
	running, err := held.client.Generate(ctx, api.GenerateRequest{Class: api.Classes{"0"}, N: 2, Mode: "draft"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	<-held.gate.stored // the worker now waits in the hook: nothing else runs
	queued, err := held.client.Generate(ctx, api.GenerateRequest{Class: api.Classes{"1"}, N: 1, Mode: "draft"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.client.Delete(ctx, queued.ID); err != nil {
		t.Fatal(err)
	}
	if a := held.call(t, "GET", queued.Links.Grid, ""); a.code != 404 || !strings.Contains(string(a.body), "has no finished images yet") {
		t.Errorf("grid of a job without images: %d %s", a.code, a.body)
	}
	if a := held.call(t, "GET", running.Links.Grid, ""); a.code != 200 || a.header.Get("Cache-Control") != "" {
		t.Errorf("grid of a running job: %d, Cache-Control %q", a.code, a.header.Get("Cache-Control"))
	}
	if a := ts.call(t, "GET", "/v1/generations/00000000-0000-4000-8000-000000000000/grid.png", ""); a.code != 404 {
		t.Errorf("grid of an unknown job: %d %s", a.code, a.body)
	}
}

// A pack with a distilled head lists it among its samplers, with the step counts it runs.
func TestModelListsDistilledHead(t *testing.T) {
	_, cat := generation.TestModelsWithDistilled()
	m := generation.WireModels(cat).Models[0]
	if !slices.Contains(m.Samplers, "distilled") || !slices.Equal(m.DistilledSteps, []int{1, 2, 4}) {
		t.Errorf("samplers %v, distilled steps %v; want distilled with 1, 2, 4", m.Samplers, m.DistilledSteps)
	}
}
