// Package loadtest drives a marspec service over HTTP as its users do: concurrent clients,
// each with one request in flight, a seeded mix of requests, latency percentiles, and a check
// that every job completed exactly once (own job id, succeeded, each image once, and the
// servers' own count). It is the client side of api/; `marspec loadtest` gives it flags.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"marspec/api"
)

// Mix is what a pass sends: Requests requests of MinImages to MaxImages images of one random
// class each (seeded), with the settings given (empty and nil leave them to the service).
type Mix struct {
	Clients, Requests    int
	Duration             time.Duration // no new request after it; running ones finish
	MinImages, MaxImages int
	Seed                 uint64
	Mode, Preset         string
	NumIter              *int
}

// Result is one pass of the load test.
type Result struct {
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

// Drive runs one pass of mix against the servers (replicas of one service, requests
// round-robin; one server is the usual case), batching naming the pass in the results.
func Drive(servers []*api.Client, mix Mix, batching string) (Result, error) {
	return drive(replicas(servers), mix, Result{Batching: batching})
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
func drive(cs replicas, f Mix, res Result) (Result, error) {
	ctx := context.Background()
	models, err := cs[0].Models(ctx)
	if err != nil {
		return res, err
	}
	classes := len(models.Models[0].Classes)
	rng := rand.New(rand.NewPCG(f.Seed, 0x6c6f6164))
	mix := make([]loadRequest, f.Requests)
	for i := range mix {
		n := f.MinImages + rng.IntN(f.MaxImages-f.MinImages+1)
		seed := f.Seed*1_000_003 + uint64(i)
		r := api.GenerateRequest{Class: api.Classes{strconv.Itoa(rng.IntN(classes))}, N: n, Seed: &seed, Mode: f.Mode, Preset: f.Preset}
		r.NumIter = f.NumIter
		mix[i].req = r
	}
	// Warm-up, untimed: the first clients' requests at once, so the runtime has met the
	// batch shapes of the pass before it is timed.
	for i := range min(f.Clients, len(mix)) {
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
	deadline := time.Now().Add(f.Duration)
	start := time.Now()
	var wg sync.WaitGroup
	for range f.Clients {
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

// Print writes the passes as a Markdown table, with the ratio of batching on over off when
// both ran.
func Print(w io.Writer, results []Result) {
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
