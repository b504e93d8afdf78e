package server

import "github.com/prometheus/client_golang/prometheus"

// keyMetrics count each API key's requests, refusals and jobs (labels: the key names of
// --keys and --token, so the label set is as small as the key file).
type keyMetrics struct {
	requests *prometheus.CounterVec // by key and status code
	limited  *prometheus.CounterVec // 429s by key and limit (rate, max_in_flight)
	jobs     *prometheus.CounterVec // jobs created by key
	replayed *prometheus.CounterVec // answers with an earlier job for the same Idempotency-Key, by key
}

func newKeyMetrics(reg *prometheus.Registry) *keyMetrics {
	m := &keyMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "marspec_key_requests_total",
			Help: "Requests made with each API key, by status code."}, []string{"key", "code"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "marspec_key_limited_total",
			Help: "Requests refused with 429 because a key was over a limit (rate: this replica's; max_in_flight: all replicas')."}, []string{"key", "limit"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "marspec_key_jobs_total",
			Help: "Jobs created with each API key (\"\" without keys)."}, []string{"key"}),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "marspec_key_idempotent_replays_total",
			Help: "POSTs answered with the job an earlier POST made under the same Idempotency-Key."}, []string{"key"}),
	}
	reg.MustRegister(m.requests, m.limited, m.jobs, m.replayed)
	return m
}
