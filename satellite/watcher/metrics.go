package watcher

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// Results of squall_webhooks_reloads_total.
const (
	resultOK    = "ok"
	resultError = "error"
)

// metrics are the watcher's Prometheus metrics.
type metrics struct {
	scans      prometheus.Counter
	reloads    *prometheus.CounterVec
	fileErrors *prometheus.CounterVec
}

// newMetrics builds the metrics, with gauges that read w's current snapshot,
// and registers them with reg; a nil reg registers nothing.
func newMetrics(reg prometheus.Registerer, w *Watcher) (*metrics, error) {
	m := &metrics{
		scans:      metricset.Counter("squall_webhooks_scans_total", "Reads of the webhook directory (after events, periodic, or asked for)."),
		reloads:    metricset.CounterVec("squall_webhooks_reloads_total", "New webhook sets published (ok), or reads of the directory that failed and kept the current set (error).", "result"),
		fileErrors: metricset.CounterVec("squall_webhooks_file_errors_total", "Webhook files skipped when a new set was published, by reason (invalid, duplicate, unreadable).", "reason"),
	}
	for _, r := range []string{resultOK, resultError} {
		m.reloads.WithLabelValues(r)
	}
	for _, r := range []string{reasonDuplicate, reasonInvalid, reasonUnreadable} {
		m.fileErrors.WithLabelValues(r)
	}
	snap := func(f func(*Snapshot) float64) func() float64 {
		return func() float64 {
			if s := w.Snapshot(); s != nil {
				return f(s)
			}
			return 0
		}
	}
	if _, err := metricset.Register(reg,
		m.scans, m.reloads, m.fileErrors,
		metricset.GaugeFunc("squall_webhooks_loaded", "Webhooks of the current set.", snap(func(s *Snapshot) float64 { return float64(len(s.Webhooks)) })),
		metricset.GaugeFunc("squall_webhooks_skipped_files", "Webhook files left out of the current set (invalid, duplicate or unreadable).", snap(func(s *Snapshot) float64 { return float64(len(s.Problems)) })),
		metricset.GaugeFunc("squall_webhooks_generation", "Number of webhook sets published since the start.", snap(func(s *Snapshot) float64 { return float64(s.Generation) })),
		metricset.GaugeFunc("squall_webhooks_last_reload_timestamp_seconds", "When the current webhook set was read, in seconds since the Unix epoch.", snap(func(s *Snapshot) float64 { return float64(s.LoadedAt.UnixNano()) / 1e9 })),
	); err != nil {
		return nil, fmt.Errorf("register watcher metrics: %w", err)
	}
	return m, nil
}
