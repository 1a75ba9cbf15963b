package intake

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the intake's Prometheus metrics.
type metrics struct {
	requests *prometheus.CounterVec
	duration prometheus.Histogram
	inflight prometheus.Gauge
}

// newMetrics builds the metrics and registers them with reg; a nil reg
// registers nothing.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "squall_intake_requests_total",
			Help: "Webhook calls, by webhook id (empty when the id is unknown) and HTTP status.",
		}, []string{"webhook", "code"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "squall_intake_request_duration_seconds",
			Help: "Time to answer a webhook call, Kafka acknowledgement or spool write included.",
			// 100µs to ~3.3s.
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "squall_intake_in_flight_requests",
			Help: "Webhook calls being handled.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	collectors := []prometheus.Collector{m.requests, m.duration, m.inflight}
	for i, c := range collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range collectors[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register intake metrics: %w", err)
		}
	}
	return m, nil
}
