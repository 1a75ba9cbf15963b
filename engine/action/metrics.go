package action

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// Reasons of squall_action_failed_total.
const (
	reasonPermanent = "permanent" // a permanent failure
	reasonExhausted = "exhausted" // retriable, but every attempt failed
	reasonCanceled  = "canceled"  // the context ended first
)

// metrics are the registry's Prometheus metrics. Only registered action ids
// become label values: ids that come from trees but have no executor are
// counted without a label, so they cannot grow the series.
type metrics struct {
	*metricset.Set

	executed *prometheus.CounterVec
	failed   *prometheus.CounterVec
	retried  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	unknown  prometheus.Counter
	// archiveRepeats counts the archive lines not written again.
	archiveRepeats prometheus.Counter
}

// newMetrics builds the metrics and registers them with reg; a nil reg
// registers nothing.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		executed: metricset.CounterVec("squall_action_executed_total", "Actions that ran successfully (once per action, however many attempts it took), by action id.", "action"),
		failed:   metricset.CounterVec("squall_action_failed_total", "Actions that failed for good, by action id and reason (permanent, exhausted, canceled).", "action", "reason"),
		retried:  metricset.CounterVec("squall_action_retried_total", "Retries of actions after a retriable failure, by action id.", "action"),
		// 50µs to ~13s.
		duration: metricset.HistogramVec("squall_action_duration_seconds", "Duration of one execution attempt of an action, by action id.", prometheus.ExponentialBuckets(0.00005, 4, 10), "action"),
		unknown:  metricset.Counter("squall_action_unknown_total", "Actions dropped because no executor handles their id."),
		archiveRepeats: metricset.Counter("squall_action_archive_repeats_total",
			"Archive lines not written because their file already holds their idempotency key (an event run again after a crash, rebalance or restart)."),
	}
	var err error
	if m.Set, err = metricset.Register(reg, m.executed, m.failed, m.retried, m.duration, m.unknown, m.archiveRepeats); err != nil {
		return nil, fmt.Errorf("register action metrics: %w", err)
	}
	return m, nil
}

// actionMetrics are the series of one action id, resolved once.
type actionMetrics struct {
	executed, retried              prometheus.Counter
	permanent, exhausted, canceled prometheus.Counter
	duration                       prometheus.Observer
}

func (m *metrics) forAction(id string) actionMetrics {
	return actionMetrics{
		executed:  m.executed.WithLabelValues(id),
		retried:   m.retried.WithLabelValues(id),
		permanent: m.failed.WithLabelValues(id, reasonPermanent),
		exhausted: m.failed.WithLabelValues(id, reasonExhausted),
		canceled:  m.failed.WithLabelValues(id, reasonCanceled),
		duration:  m.duration.WithLabelValues(id),
	}
}
