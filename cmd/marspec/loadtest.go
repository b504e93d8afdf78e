package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/server"
)

// loadFlags are the settings of `marspec loadtest`.
type loadFlags struct {
	server, token   string
	clients, reqs   int
	duration        time.Duration
	minImg, maxImg  int
	numIter         *int // nil: the request leaves it to the service
	mode, preset    string
	crossBatch      string
	seed            uint64
	maxBatch, queue int
	target, draft   string
	jsonOut         string
	rounds          int
	rt              *runtimeFlags
}

// loadResult is one pass of the load test.
type loadResult struct {
	Batching       string  `json:"batching"`
	Requests       int     `json:"requests"`
	Images         int     `json:"images"`
	Rejected       int     `json:"rejected_503"`
	Seconds        float64 `json:"seconds"`
	ImagesPerSec   float64 `json:"images_per_second"`
	RequestsPerSec float64 `json:"requests_per_second"`
	P50            float64 `json:"latency_p50_seconds"`
	P95            float64 `json:"latency_p95_seconds"`
	P99            float64 `json:"latency_p99_seconds"`
	MeanBatch      float64 `json:"mean_batch_images"`
	EngineSteps    int     `json:"engine_steps"`
	StoppedEarly   bool    `json:"stopped_by_duration"`
}

func runLoadtest(args []string) error {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	var f loadFlags
	fs.StringVar(&f.server, "server", "", "a running server to load, or replicas of one service comma-separated (requests go round-robin; loopback only); default: start one in this process on the embedded models")
	fs.StringVar(&f.token, "token", os.Getenv("MARSPEC_TOKEN"), "API token of --server ($MARSPEC_TOKEN)")
	fs.IntVar(&f.clients, "clients", 8, "concurrent clients, each with one request in flight (1 to 256)")
	fs.IntVar(&f.reqs, "requests", 40, "requests per pass (1 to 10000)")
	fs.DurationVar(&f.duration, "duration", 5*time.Minute, "per pass, no new request after this (running ones finish)")
	images := fs.String("images", "2-4", "images per request: N or LO-HI (uniform)")
	numIter := fs.Int("num-iter", 0, "AR steps per image (target and draft modes; 0 = one token per step); unset: the service's default")
	fs.StringVar(&f.mode, "mode", "", "target, draft or spec; unset: the service's default request (its default preset, "+generation.DefaultPreset+")")
	fs.StringVar(&f.preset, "preset", "", "a preset for every request: "+strings.Join(generation.PresetNames(), ", ")+"; unset: the service's default")
	fs.StringVar(&f.crossBatch, "cross-batch", "both", "in-process server: on, off (one request per batch) or both, side by side")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the request mix (classes, counts) and of the requests")
	fs.IntVar(&f.maxBatch, "max-batch", 32, "in-process server: images in flight per engine group")
	fs.IntVar(&f.queue, "queue", 64, "in-process server: queue bound")
	fs.StringVar(&f.target, "target", "target", "in-process server: target pack")
	fs.StringVar(&f.draft, "draft", "draft", "in-process server: draft pack (opened for mode spec only)")
	fs.StringVar(&f.jsonOut, "json", "", "also write the results as JSON to this file")
	fs.IntVar(&f.rounds, "rounds", 1, "with --cross-batch both: rounds of one pass each, in the order on,off then off,on (drift cancels)")
	f.rt = addRuntimeFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "num-iter" {
			f.numIter = numIter
		}
	})
	if err := f.check(*images); err != nil {
		return err
	}
	passes := []string{f.crossBatch}
	if f.crossBatch == "both" {
		passes = nil
		for r := range f.rounds {
			if r%2 == 0 {
				passes = append(passes, "on", "off")
			} else {
				passes = append(passes, "off", "on")
			}
		}
	}
	if f.server != "" {
		passes = []string{"server's setting"}
	}
	fmt.Printf("# marspec loadtest: %s/%s, %d CPUs, device %s; %d clients, %d requests of %d-%d images, %s\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), f.rt.device, f.clients, f.reqs, f.minImg, f.maxImg, f.describeRequest())
	var results []loadResult
	var models generation.Models // shared by the passes: packs open once
	for _, batching := range passes {
		res, err := f.pass(batching, &models)
		if err != nil {
			return fmt.Errorf("pass with cross-request batching %s: %w", batching, err)
		}
		results = append(results, res)
	}
	printLoadResults(os.Stdout, results)
	if f.jsonOut != "" {
		data, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(f.jsonOut, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (f *loadFlags) check(images string) error {
	lo, hi, ok := strings.Cut(images, "-")
	if !ok {
		hi = lo
	}
	var err1, err2 error
	f.minImg, err1 = strconv.Atoi(lo)
	f.maxImg, err2 = strconv.Atoi(hi)
	switch {
	case err1 != nil || err2 != nil || f.minImg < 1 || f.maxImg < f.minImg || f.maxImg > 256:
		return fmt.Errorf("--images %q: want N or LO-HI with 1 <= LO <= HI <= 256", images)
	case f.clients < 1 || f.clients > 256:
		return fmt.Errorf("--clients %d out of range (allowed: 1 to 256)", f.clients)
	case f.reqs < 1 || f.reqs > 10000:
		return fmt.Errorf("--requests %d out of range (allowed: 1 to 10000)", f.reqs)
	case f.duration <= 0 || f.duration > 24*time.Hour:
		return fmt.Errorf("--duration %s out of range (allowed: above 0, at most 24h)", f.duration)
	case f.crossBatch != "on" && f.crossBatch != "off" && f.crossBatch != "both":
		return fmt.Errorf("--cross-batch %q unknown (allowed: on, off, both)", f.crossBatch)
	case f.rounds < 1 || f.rounds > 20 || (f.rounds > 1 && f.crossBatch != "both"):
		return fmt.Errorf("--rounds %d: 1 to 20, and above 1 only with --cross-batch both", f.rounds)
	case f.server != "" && f.crossBatch != "both":
		return fmt.Errorf("--cross-batch applies to the in-process server; start --server with --cross-batch=%v instead", f.crossBatch == "on")
	}
	if _, _, _, err := generation.ResolveMode(f.request()); err != nil {
		return err
	}
	if err := generation.CheckNumbers(f.request().GenerateRequest); err != nil {
		return err
	}
	for _, s := range f.servers() {
		if err := loopbackOnly(s); err != nil {
			return err
		}
	}
	return nil
}

// servers are the --server addresses (replicas of one service share its store and queue).
func (f *loadFlags) servers() []string {
	if f.server == "" {
		return nil
	}
	return strings.Split(f.server, ",")
}

// request is the settings every request of the mix carries (only what the flags set, so the
// rest is the service's default).
func (f *loadFlags) request() generation.Request {
	return generation.Request{GenerateRequest: api.GenerateRequest{Mode: f.mode, Preset: f.preset, NumIter: f.numIter}}
}

// resolvedMode is the mode the service will run the requests in.
func (f *loadFlags) resolvedMode() string {
	mode, _, _, _ := generation.ResolveMode(f.request())
	return mode
}

// describeRequest says what the requests run, for the report's header.
func (f *loadFlags) describeRequest() string {
	mode, preset, _, _ := generation.ResolveMode(f.request())
	s := "mode " + mode
	if preset != "" {
		s = "preset " + preset + " (" + s + ")"
		if f.preset == "" {
			s = "the service's default request: " + s
		}
	}
	if f.numIter != nil {
		s += fmt.Sprintf(", num_iter %d", *f.numIter)
	}
	return s
}

// loopbackOnly refuses a server that is not this machine: a load test is not for others'.
func loopbackOnly(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("--server %q: want http://127.0.0.1:PORT", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--server %q: loopback addresses only (127.0.0.1, ::1, localhost)", raw)
}

// pass runs the request mix once against a server: --server, or one started here with
// cross-request batching on or off.
func (f *loadFlags) pass(batching string, models *generation.Models) (loadResult, error) {
	res := loadResult{Batching: batching}
	bases, token := f.servers(), f.token
	if len(bases) == 0 {
		cfg := server.DefaultConfig()
		cfg.Addr, cfg.MaxBatch, cfg.QueueSize, cfg.CrossBatch = "127.0.0.1:0", f.maxBatch, f.queue, batching == "on"
		cfg.Target, cfg.Draft, cfg.Drain = f.target, "", 0
		if mode := f.resolvedMode(); mode == generation.ModeSpec || mode == generation.ModeDraft {
			cfg.Draft = f.draft
		}
		cfg.ORTLib, cfg.Device, cfg.Threads = f.rt.ortLib, f.rt.device.String(), f.rt.threads
		dir, err := os.MkdirTemp("", "marspec-loadtest-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
		cfg.DataDir = dir
		if *models == nil {
			*models = ortModels(cfg)
		}
		srv, st, err := openServer(cfg, *models, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			return res, err
		}
		defer st.Close()
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return res, err
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serveUntilDone(ctx, srv, ln, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
		defer func() { stop(); <-done }()
		bases, token = []string{"http://" + ln.Addr().String()}, ""
	}
	var cs replicas
	for _, base := range bases {
		c, err := api.NewClient(base, token, nil)
		if err != nil {
			return res, err
		}
		cs = append(cs, c)
	}
	res, err := f.drive(cs, res)
	return res, explainUnreachable(strings.Join(bases, ","), err)
}

// replicas are the clients of the servers under load: request i goes to replica i mod n, and
// a counter of the service is the sum of the replicas' own.
type replicas []*api.Client

func (cs replicas) pick(i int) *api.Client { return cs[i%len(cs)] }

// metrics scrapes every replica's /metrics.
func (cs replicas) metrics(ctx context.Context) ([]string, error) {
	texts := make([]string, len(cs))
	for i, c := range cs {
		var err error
		if texts[i], err = c.Metrics(ctx); err != nil {
			return nil, err
		}
	}
	return texts, nil
}

// metricSum is a series summed over the replicas' scrapes.
func metricSum(texts []string, series string) float64 {
	sum := 0.0
	for _, t := range texts {
		sum += metricSample(t, series)
	}
	return sum
}

// loadRequest is one request of the mix and what became of it.
type loadRequest struct {
	req     api.GenerateRequest
	id      string
	latency time.Duration
	err     error
}

// drive warms the server up, runs the mix with the clients and checks every job completed
// exactly once.
func (f *loadFlags) drive(cs replicas, res loadResult) (loadResult, error) {
	ctx := context.Background()
	models, err := cs[0].Models(ctx)
	if err != nil {
		return res, err
	}
	classes := len(models.Models[0].Classes)
	rng := rand.New(rand.NewPCG(f.seed, 0x6c6f6164))
	mix := make([]loadRequest, f.reqs)
	for i := range mix {
		n := f.minImg + rng.IntN(f.maxImg-f.minImg+1)
		seed := f.seed*1_000_003 + uint64(i)
		r := api.GenerateRequest{Class: api.Classes{strconv.Itoa(rng.IntN(classes))}, N: n, Seed: &seed, Mode: f.mode, Preset: f.preset}
		r.NumIter = f.numIter
		mix[i].req = r
	}
	// Warm-up, untimed: the first clients' requests at once, so the runtime has met the
	// batch shapes of the pass before it is timed.
	for i := range min(f.clients, len(mix)) {
		if _, err := cs.pick(i).Generate(ctx, mix[i].req, 0); err != nil {
			return res, fmt.Errorf("warm-up request: %w", err)
		}
	}
	if err := waitIdle(ctx, cs); err != nil {
		return res, err
	}
	before, err := cs.metrics(ctx)
	if err != nil {
		return res, err
	}
	var next, rejected atomic.Int64
	deadline := time.Now().Add(f.duration)
	start := time.Now()
	var wg sync.WaitGroup
	for range f.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(mix) || time.Now().After(deadline) {
					return
				}
				mix[i].id, mix[i].latency, mix[i].err = runOne(cs.pick(i), mix[i].req, &rejected)
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	after, err := cs.metrics(ctx)
	if err != nil {
		return res, err
	}
	var latencies []float64
	for _, r := range mix {
		if r.id == "" && r.err == nil {
			res.StoppedEarly = true
			continue
		}
		if r.err != nil {
			return res, r.err
		}
		res.Requests++
		res.Images += r.req.N
		latencies = append(latencies, r.latency.Seconds())
	}
	if err := checkExactlyOnce(ctx, cs, mix, before, after); err != nil {
		return res, err
	}
	slices.Sort(latencies)
	res.P50, res.P95, res.P99 = percentile(latencies, 0.50), percentile(latencies, 0.95), percentile(latencies, 0.99)
	res.ImagesPerSec = float64(res.Images) / res.Seconds
	res.RequestsPerSec = float64(res.Requests) / res.Seconds
	res.Rejected = int(rejected.Load())
	steps := metricSum(after, "marspec_batch_images_count") - metricSum(before, "marspec_batch_images_count")
	res.EngineSteps = int(steps)
	if steps > 0 {
		res.MeanBatch = (metricSum(after, "marspec_batch_images_sum") - metricSum(before, "marspec_batch_images_sum")) / steps
	}
	return res, nil
}

// runOne submits a request (waiting out 503s as told) and follows its events to the end.
func runOne(c *api.Client, req api.GenerateRequest, rejected *atomic.Int64) (string, time.Duration, error) {
	ctx := context.Background()
	start := time.Now()
	for {
		g, err := c.Generate(ctx, req, 0)
		var apiErr *api.Error
		if errors.As(err, &apiErr) && apiErr.Status == 503 {
			rejected.Add(1)
			time.Sleep(max(apiErr.RetryAfter/10, 50*time.Millisecond))
			continue
		}
		if err != nil {
			return "", 0, err
		}
		final, err := c.Events(ctx, g.ID, nil)
		if err != nil {
			return g.ID, 0, err
		}
		if final.Status != api.StatusSucceeded {
			return g.ID, 0, fmt.Errorf("job %s %s: %s", g.ID, final.Status, final.Error)
		}
		return g.ID, time.Since(start), nil
	}
}

// waitIdle waits for the servers' queues to empty (after the warm-up): each replica's own,
// and the shared queue of a PostgreSQL store.
func waitIdle(ctx context.Context, cs replicas) error {
	for range 6000 {
		texts, err := cs.metrics(ctx)
		if err != nil {
			return err
		}
		if metricSum(texts, "marspec_queue_depth") == 0 && metricSum(texts, "marspec_queue_waiting") == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the server's queue did not empty within a minute")
}

// checkExactlyOnce: every request got its own job, which succeeded once with each of its
// images once, as the stored state says too; the servers together counted exactly that many
// jobs (a replica counts the jobs it finished, whoever accepted them).
func checkExactlyOnce(ctx context.Context, cs replicas, mix []loadRequest, before, after []string) error {
	seenJobs, seenImages := map[string]bool{}, map[string]bool{}
	done := 0
	for i, r := range mix {
		if r.id == "" {
			continue
		}
		done++
		if seenJobs[r.id] {
			return fmt.Errorf("job %s was given to two requests", r.id)
		}
		seenJobs[r.id] = true
		g, err := cs.pick(i).Generation(ctx, r.id) // asked where it was posted
		if err != nil {
			return err
		}
		if g.Status != api.StatusSucceeded || len(g.Images) != r.req.N {
			return fmt.Errorf("job %s: %s with %d of %d images", r.id, g.Status, len(g.Images), r.req.N)
		}
		for k, im := range g.Images {
			if im.Index != k || seenImages[im.ID] {
				return fmt.Errorf("job %s: image %d listed as %d (or twice)", r.id, k, im.Index)
			}
			seenImages[im.ID] = true
		}
	}
	const ok = `marspec_jobs_total{status="succeeded"}`
	if got := metricSum(after, ok) - metricSum(before, ok); int(got) != done {
		return fmt.Errorf("the servers counted %v finished jobs, the clients %d", got, done)
	}
	return nil
}

// metricSample reads one series from a Prometheus text exposition (0 if absent).
func metricSample(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return v
			}
		}
	}
	return 0
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

func printLoadResults(w io.Writer, results []loadResult) {
	fmt.Fprintln(w, "\n| cross-request batching | requests | images | seconds | images/s | requests/s | p50 s | p95 s | p99 s | mean batch (images/step) | 503s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		note := ""
		if r.StoppedEarly {
			note = " (stopped by --duration)"
		}
		fmt.Fprintf(w, "| %s | %d%s | %d | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f | %.2f | %d |\n", r.Batching, r.Requests, note, r.Images,
			r.Seconds, r.ImagesPerSec, r.RequestsPerSec, r.P50, r.P95, r.P99, r.MeanBatch, r.Rejected)
	}
	var images, secs [2]float64 // on, off
	var p50 [2][]float64
	for _, r := range results {
		k := 0
		if r.Batching == "off" {
			k = 1
		} else if r.Batching != "on" {
			continue
		}
		images[k] += float64(r.Images)
		secs[k] += r.Seconds
		p50[k] = append(p50[k], r.P50)
	}
	if secs[0] > 0 && secs[1] > 0 {
		fmt.Fprintf(w, "\nimages/s, batching on over off (all passes pooled): %.2fx; median p50 latency on over off: %.2fx\n",
			(images[0]/secs[0])/(images[1]/secs[1]), medianOf(p50[0])/medianOf(p50[1]))
	}
	fmt.Fprintln(w, "every job completed exactly once: checked (own job id, succeeded, each image once, server's job count)")
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
