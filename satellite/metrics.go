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
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "squall_forward_events_total",
			Help: "Accepted events, by where they were when the call was answered (kafka or spool).",
		}, []string{"path"}),
		drained: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_forward_drained_total",
			Help: "Spooled events delivered to Kafka.",
		}),
		spooling: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "squall_forward_spooling",
			Help: "1 while new events go to the spool (Kafka unavailable or the spool not yet drained), 0 while they go to Kafka directly.",
		}),
		kafkaUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "squall_kafka_up",
			Help: "1 if the last write to Kafka or check of a broker succeeded, else 0.",
		}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_intake_connections_refused_total",
			Help: "Connections answered 503 OVERLOADED and closed because --max-connections were open.",
		}),
	}
	m.toKafka = m.forwarded.WithLabelValues(pathKafka)
	m.forwarded.WithLabelValues(pathSpool)
	if _, err := metricset.Register(reg, m.forwarded, m.drained, m.spooling, m.kafkaUp, m.connsRefused); err != nil {
		return nil, fmt.Errorf("register forwarder metrics: %w", err)
	}
	return m, nil
}
