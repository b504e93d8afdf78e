// Package loadtest drives a marspec service over HTTP as its users do: concurrent clients,
// each with one request in flight, a seeded mix of requests, latency percentiles, and a check
// that every job completed exactly once (own job id, succeeded, each image once, and the
// servers' own count). It is the client side of api/; `marspec loadtest` gives it flags.
package loadtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
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
	Precision            string // the requests' precision ("": the service's, its preset's or default)
	NumIter              *int
	// GiveUp is how long a request may find no replica to take it, or its job unreadable
	// after its stream was cut (0: two minutes).
	GiveUp time.Duration
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
	// Failures counts what went wrong, by cause and status: refused and unanswered POSTs
	// (each retry counted), jobs that did not succeed, streams cut.
	Failures map[string]int `json:"failures,omitempty"`
	// Verdict is the exactly-once check on the jobs this pass created, in one line.
	Verdict string `json:"verdict"`
}

// ReplicaError is a failure of one replica the pass could not do without (the warm-up, or
// every replica gone): Base names it.
type ReplicaError struct {
	Base string
	Err  error
}

func (e *ReplicaError) Error() string { return e.Base + ": " + e.Err.Error() }
func (e *ReplicaError) Unwrap() error { return e.Err }

// tally counts failures by cause; safe for concurrent use.
type tally struct {
	mu sync.Mutex
	by map[string]int
}

func (t *tally) add(cause string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[string]int{}
	}
	t.by[cause]++
}

// brief is the first words of a message, for a cause that groups alike failures.
func brief(msg string) string {
	if i := strings.IndexAny(msg, ";("); i > 0 {
		msg = msg[:i]
	}
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return strings.TrimSpace(msg)
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

// metrics scrapes every replica's /metrics; missing are the replicas that did not answer
// (their texts are empty).
func (cs replicas) metrics(ctx context.Context) (texts []string, missing []string) {
	texts = make([]string, len(cs))
	for i, c := range cs {
		var err error
		if texts[i], err = c.Metrics(ctx); err != nil {
			missing = append(missing, c.Base())
		}
	}
	return texts, missing
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
		return res, &ReplicaError{cs[0].Base(), err}
	}
	classes := len(models.Models[0].Classes)
	rng := rand.New(rand.NewPCG(f.Seed, 0x6c6f6164))
	mix := make([]loadRequest, f.Requests)
	for i := range mix {
		n := f.MinImages + rng.IntN(f.MaxImages-f.MinImages+1)
		seed := f.Seed*1_000_003 + uint64(i)
		r := api.GenerateRequest{Class: api.Classes{strconv.Itoa(rng.IntN(classes))}, N: n, Seed: &seed, Mode: f.Mode, Preset: f.Preset,
			Precision: f.Precision}
		r.NumIter = f.NumIter
		mix[i].req = r
	}
	// Warm-up, untimed: the first clients' requests at once, so the runtime has met the
	// batch shapes of the pass before it is timed.
	for i := range min(f.Clients, len(mix)) {
		if _, err := cs.pick(i).Generate(ctx, mix[i].req, 0); err != nil {
			return res, &ReplicaError{cs.pick(i).Base(), fmt.Errorf("warm-up request: %w", err)}
		}
	}
	if err := waitIdle(ctx, cs); err != nil {
		return res, err
	}
	before, missingBefore := cs.metrics(ctx)
	var next atomic.Int64
	var failures tally
	giveUp := cmp.Or(f.GiveUp, 2*time.Minute)
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
				mix[i].id, mix[i].latency, mix[i].err = runOne(ctx, cs, i, mix[i].req, giveUp, &failures)
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	after, missingAfter := cs.metrics(ctx)
	var latencies []float64
	for _, r := range mix {
		if r.id == "" && r.err == nil {
			res.StoppedEarly = true
			continue
		}
		if r.err != nil {
			continue // counted in Failures, judged by the verdict
		}
		res.Requests++
		res.Images += r.req.N
		latencies = append(latencies, r.latency.Seconds())
	}
	res.Failures = failures.by
	for cause, n := range res.Failures {
		if strings.Contains(cause, " 503") {
			res.Rejected += n
		}
	}
	var verr error
	res.Verdict, verr = verdict(ctx, cs, mix, before, after, append(missingBefore, missingAfter...))
	slices.Sort(latencies)
	res.P50, res.P95, res.P99 = percentile(latencies, 0.50), percentile(latencies, 0.95), percentile(latencies, 0.99)
	res.ImagesPerSec = float64(res.Images) / res.Seconds
	res.RequestsPerSec = float64(res.Requests) / res.Seconds
	steps := metricSum(after, "marspec_batch_images_count") - metricSum(before, "marspec_batch_images_count")
	res.EngineSteps = int(steps)
	if steps > 0 {
		res.MeanBatch = (metricSum(after, "marspec_batch_images_sum") - metricSum(before, "marspec_batch_images_sum")) / steps
	}
	return res, verr
}

// runOne submits request i (waiting out 503s as told, and going on to the next replica when
// one does not answer) and follows its job to the end, through another replica if the
// stream is cut. Every failure on the way is counted by cause in t.
func runOne(ctx context.Context, cs replicas, i int, req api.GenerateRequest, giveUp time.Duration, t *tally) (string, time.Duration, error) {
	start := time.Now()
	var g *api.Generation
	at := i // the replica that took the job
	for ; ; at++ {
		c := cs.pick(at)
		var err error
		if g, err = c.Generate(ctx, req, 0); err == nil {
			break
		}
		var apiErr *api.Error
		switch {
		case errors.As(err, &apiErr) && apiErr.Status == 503:
			t.add("POST answered 503: " + brief(apiErr.Body.Error))
			time.Sleep(max(apiErr.RetryAfter/10, 50*time.Millisecond))
		case errors.As(err, &apiErr):
			t.add(fmt.Sprintf("POST answered %d: %s", apiErr.Status, brief(apiErr.Body.Error)))
			return "", 0, err // the request never became a job
		default:
			t.add("POST unanswered by " + c.Base())
			time.Sleep(100 * time.Millisecond)
		}
		if time.Since(start) > giveUp {
			return "", 0, fmt.Errorf("no replica took the request in %v: %w", giveUp, err)
		}
	}
	final, err := follow(ctx, cs, at, g.ID, giveUp, t)
	if err != nil {
		return g.ID, 0, err
	}
	if final.Status != api.StatusSucceeded {
		t.add("job " + final.Status + ": " + brief(final.Error))
		return g.ID, 0, fmt.Errorf("job %s %s: %s", g.ID, final.Status, final.Error)
	}
	return g.ID, time.Since(start), nil
}

// follow waits for job id to end: its event stream on the replica it was posted to, and if
// that stream is cut (the replica died), polling the replicas in turn.
func follow(ctx context.Context, cs replicas, i int, id string, giveUp time.Duration, t *tally) (*api.Generation, error) {
	if final, err := cs.pick(i).Events(ctx, id, nil); err == nil {
		return final, nil
	}
	t.add("event stream cut on " + cs.pick(i).Base())
	deadline := time.Now().Add(giveUp)
	for try := 1; ; try++ {
		g, err := cs.pick(i+try).Generation(ctx, id)
		if err == nil && g.Ended() {
			return g, nil
		}
		if time.Now().After(deadline) {
			t.add("job unreadable for " + giveUp.String())
			return nil, fmt.Errorf("job %s: not ended or not readable %v after its stream was cut: %v", id, giveUp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitIdle waits for the servers' queues to empty (after the warm-up): each replica's own,
// and the shared queue of a PostgreSQL store.
func waitIdle(ctx context.Context, cs replicas) error {
	for range 6000 {
		texts, missing := cs.metrics(ctx)
		if len(missing) > 0 {
			return &ReplicaError{missing[0], errors.New("/metrics did not answer")}
		}
		if metricSum(texts, "marspec_queue_depth") == 0 && metricSum(texts, "marspec_queue_waiting") == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the server's queue did not empty within a minute")
}

// verdict is the exactly-once check on the jobs this pass created: each request that became
// a job got its own, which succeeded once with each of its images once, as the stored state
// says too; and the servers together counted as many succeeded jobs. More counted than
// created means others share the service (said, not failed); fewer is a failure, unless a
// replica's /metrics did not answer (then the count is not checked, and the verdict says so).
func verdict(ctx context.Context, cs replicas, mix []loadRequest, before, after []string, unscraped []string) (string, error) {
	seenJobs, seenImages := map[string]bool{}, map[string]bool{}
	created, never := 0, 0
	var bad []string
	for i, r := range mix {
		if r.id == "" {
			if r.err != nil {
				never++
			}
			continue
		}
		created++
		if seenJobs[r.id] {
			bad = append(bad, fmt.Sprintf("job %s was given to two requests", r.id))
			continue
		}
		seenJobs[r.id] = true
		g, err := readJob(ctx, cs, i, r.id)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if g.Status != api.StatusSucceeded || len(g.Images) != r.req.N {
			bad = append(bad, fmt.Sprintf("job %s: %s with %d of %d images", r.id, g.Status, len(g.Images), r.req.N))
			continue
		}
		for k, im := range g.Images {
			if im.Index != k || seenImages[im.ID] {
				bad = append(bad, fmt.Sprintf("job %s: image %d listed as %d (or twice)", r.id, k, im.Index))
				break
			}
			seenImages[im.ID] = true
		}
	}
	summary := fmt.Sprintf("%d jobs created, %d requests never became jobs", created, never)
	const ok = `marspec_jobs_total{status="succeeded"}`
	counted := int(metricSum(after, ok) - metricSum(before, ok))
	var note string
	switch {
	case len(unscraped) > 0:
		note = fmt.Sprintf("; the servers' count not checked (/metrics of %s did not answer)", strings.Join(slices.Compact(slices.Sorted(slices.Values(unscraped))), ", "))
	case counted > created:
		note = fmt.Sprintf("; the servers counted %d succeeded jobs: others share the service", counted)
	case counted < created-len(bad):
		bad = append(bad, fmt.Sprintf("the servers counted %d succeeded jobs, the clients %d", counted, created-len(bad)))
	}
	if len(bad) > 0 {
		return "FAIL: " + summary + note + "; " + bad[0], fmt.Errorf("exactly once: %d failures, the first: %s", len(bad), bad[0])
	}
	return "PASS: " + summary + ", each succeeded exactly once" + note, nil
}

// readJob reads a job where it was posted, or from the other replicas if that one is gone.
func readJob(ctx context.Context, cs replicas, i int, id string) (*api.Generation, error) {
	var err error
	for try := range len(cs) {
		var g *api.Generation
		if g, err = cs.pick(i+try).Generation(ctx, id); err == nil {
			return g, nil
		}
	}
	return nil, fmt.Errorf("job %s: no replica answered: %w", id, err)
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
	for _, r := range results {
		fmt.Fprintf(w, "\nbatching %s: %s\n", r.Batching, r.Verdict)
		causes := slices.Sorted(maps.Keys(r.Failures))
		for _, c := range causes {
			fmt.Fprintf(w, "  %6d  %s\n", r.Failures[c], c)
		}
	}
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
