package kafkasink

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// Results of squall_kafka_messages_total.
const (
	resultOK       = "ok"       // acknowledged by the brokers
	resultError    = "error"    // failed, may be retried
	resultRejected = "rejected" // can never be written
)

// metrics are the sink's Prometheus metrics.
type metrics struct {
	messages *prometheus.CounterVec
	ok       prometheus.Counter // messages{result="ok"}, counted on every write
	duration prometheus.Histogram
	batch    prometheus.Histogram
}

// newMetrics builds the metrics and registers them with reg; a nil reg
// registers nothing.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		messages: metricset.CounterVec("squall_kafka_messages_total", "Records written to Kafka, by result (ok, error, rejected).", "result"),
		// 100µs to ~3.3s.
		duration: metricset.Histogram("squall_kafka_produce_duration_seconds", "Duration of one produce request to Kafka until it is acknowledged, retries included.", prometheus.ExponentialBuckets(0.0001, 2, 16)),
		batch:    metricset.Histogram("squall_kafka_batch_records", "Records per produce request.", prometheus.ExponentialBuckets(1, 2, 11)),
	}
	for _, r := range []string{resultOK, resultError, resultRejected} {
		m.messages.WithLabelValues(r)
	}
	m.ok = m.messages.WithLabelValues(resultOK)
	if _, err := metricset.Register(reg, m.messages, m.duration, m.batch); err != nil {
		return nil, fmt.Errorf("register kafka metrics: %w", err)
	}
	return m, nil
}
