package master

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// metrics are the master's HTTP metrics; the store adds its own.
type metrics struct {
	*metricset.Set

	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	forwarded   *prometheus.CounterVec
	unavailable *prometheus.CounterVec
	panics      prometheus.Counter
}

// Outcomes of forwarded requests.
const (
	forwardOK    = "ok"
	forwardError = "error"
	// forwardRetry: the attempt failed and the request was sent again to
	// the next leader.
	forwardRetry = "retry"
)

// newMetrics builds the metrics and registers them with reg.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: metricset.CounterVec("squall_master_http_requests_total", "HTTP requests answered by this node, by route pattern, method and status code.", "route", "method", "code"),
		// 0.5ms to ~8s; tree watches wait longer and land in +Inf.
		duration:    metricset.HistogramVec("squall_master_http_request_duration_seconds", "Time to answer HTTP requests, by route pattern (forwarding and blocking waits included).", prometheus.ExponentialBuckets(0.0005, 2, 15), "route"),
		forwarded:   metricset.CounterVec("squall_master_forwarded_requests_total", "Requests this node forwarded to the leader, by outcome of each attempt (ok: the leader answered; retry: it failed and the request was sent again to the next leader; error: it failed and the request was answered 503).", "result"),
		unavailable: metricset.CounterVec("squall_master_unavailable_responses_total", "503 answers, by error code (NO_LEADER during elections, LEADER_LOST, NOT_READY, UNAVAILABLE).", "code"),
		panics:      metricset.Counter("squall_master_http_panics_total", "Requests whose handler panicked: each was answered 500 with a request id, and logged with its stack under that id."),
	}
	// The series that alerts and dashboards query exist from the start, at
	// 0, so that increase() and rate() see their first increment.
	m.forwarded.WithLabelValues(forwardOK)
	m.forwarded.WithLabelValues(forwardError)
	m.forwarded.WithLabelValues(forwardRetry)
	for _, code := range []string{codeNoLeader, codeLeaderLost, codeNotReady, codeUnavailable} {
		m.unavailable.WithLabelValues(code)
	}
	var err error
	if m.Set, err = metricset.Register(reg, m.requests, m.duration, m.forwarded, m.unavailable, m.panics); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return m, nil
}
