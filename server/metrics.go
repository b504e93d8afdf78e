package server

import (
	"math"
	"net/http"

	"marspec/generation"
	"marspec/mar"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics live in the server's own registry (not the global one), so several servers in one
// process (tests) do not collide.
type metrics struct {
	reg      *prometheus.Registry
	batch    prometheus.Histogram
	alpha    prometheus.Histogram
	latency  *prometheus.HistogramVec
	images   *prometheus.CounterVec
	jobs     *prometheus.CounterVec
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.batch = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "marspec_batch_images",
		Help: "Images in one engine step (cross-request continuous batching).", Buckets: prometheus.ExponentialBuckets(1, 2, 11)})
	m.alpha = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "marspec_image_alpha",
		Help: "Acceptance rate of speculative images.", Buckets: prometheus.LinearBuckets(0, 0.1, 11)})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "marspec_job_seconds",
		Help: "Job latency from submission to the end, by mode.", Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12)}, []string{"mode"})
	m.images = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "marspec_images_total", Help: "Images made, by mode."}, []string{"mode"})
	m.jobs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "marspec_jobs_total", Help: "Jobs ended, by final status."}, []string{"status"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "marspec_http_requests_total",
		Help: "HTTP requests by route and status code."}, []string{"route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "marspec_http_request_seconds",
		Help: "HTTP request latency by route.", Buckets: prometheus.DefBuckets}, []string{"route"})
	m.reg.MustRegister(m.batch, m.alpha, m.latency, m.images, m.jobs, m.requests, m.duration)
	return m
}

func (m *metrics) queueDepth(depth func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "marspec_queue_depth",
		Help: "Jobs accepted and not finished."}, func() float64 { return float64(depth()) }))
}

// queueWaiting is the shared queue's length (replicas): the signal to scale them on, the same
// on every replica. NaN when the store does not answer.
func (m *metrics) queueWaiting(waiting func() (int, error)) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "marspec_queue_waiting",
		Help: "Jobs in the shared queue that no replica has claimed yet."}, func() float64 {
		n, err := waiting()
		if err != nil {
			return math.NaN()
		}
		return float64(n)
	}))
}

// openingMemo counts, per open pack, the transformer rows its opening memo served from memory
// and the ones it computed (mar.OpeningMemo): whether the memo's 64 MiB hold the classes a
// deployment asks for is read from the hit share.
func (m *metrics) openingMemo(models generation.Models) {
	if open, ok := models.(generation.OpenModels); ok {
		m.reg.MustRegister(openingMemoCollector{open})
	}
}

var (
	memoHitsDesc = prometheus.NewDesc("marspec_opening_memo_hits_total",
		"Opening rows (no token known yet) served from the pack's opening memo.", []string{"pack", "precision"}, nil)
	memoComputedDesc = prometheus.NewDesc("marspec_opening_memo_computed_total",
		"Opening rows the pack's opening memo computed with the transformer.", []string{"pack", "precision"}, nil)
)

type openingMemoCollector struct{ models generation.OpenModels }

func (c openingMemoCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- memoHitsDesc
	ch <- memoComputedDesc
}

func (c openingMemoCollector) Collect(ch chan<- prometheus.Metric) {
	for name, model := range c.models.Open() {
		memo, ok := model.Transformer.(*mar.OpeningMemo)
		if !ok {
			continue
		}
		hits, computed := memo.Stats()
		pack, precision := generation.SplitModelName(name) // a pack open at two precisions has a memo each
		ch <- prometheus.MustNewConstMetric(memoHitsDesc, prometheus.CounterValue, float64(hits), pack, precision)
		ch <- prometheus.MustNewConstMetric(memoComputedDesc, prometheus.CounterValue, float64(computed), pack, precision)
	}
}

func (m *metrics) handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }
