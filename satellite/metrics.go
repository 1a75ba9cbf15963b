package satellite

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// Paths of squall_forward_events_total.
const (
	pathKafka = "kafka" // acknowledged by Kafka while the call waited
	pathSpool = "spool" // written to the spool
)

// metrics are the forwarder's Prometheus metrics.
type metrics struct {
	forwarded *prometheus.CounterVec
	toKafka   prometheus.Counter // forwarded{path="kafka"}, counted on every call
	drained   prometheus.Counter
	spooling  prometheus.Gauge
	kafkaUp   prometheus.Gauge
	// connsRefused counts the connections refused over
	// Config.MaxConnections.
	connsRefused prometheus.Counter
}

// newMetrics builds the metrics and registers them with reg; a nil reg
// registers nothing.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		forwarded:    metricset.CounterVec("squall_forward_events_total", "Accepted events, by where they were when the call was answered (kafka or spool).", "path"),
		drained:      metricset.Counter("squall_forward_drained_total", "Spooled events delivered to Kafka."),
		spooling:     metricset.Gauge("squall_forward_spooling", "1 while new events go to the spool (Kafka unavailable or the spool not yet drained), 0 while they go to Kafka directly."),
		kafkaUp:      metricset.Gauge("squall_kafka_up", "1 if the last write to Kafka or check of a broker succeeded, else 0."),
		connsRefused: metricset.Counter("squall_intake_connections_refused_total", "Connections answered 503 OVERLOADED and closed because --max-connections were open."),
	}
	m.toKafka = m.forwarded.WithLabelValues(pathKafka)
	m.forwarded.WithLabelValues(pathSpool)
	if _, err := metricset.Register(reg, m.forwarded, m.drained, m.spooling, m.kafkaUp, m.connsRefused); err != nil {
		return nil, fmt.Errorf("register forwarder metrics: %w", err)
	}
	return m, nil
}
