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
		scans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_webhooks_scans_total",
			Help: "Reads of the webhook directory (after events, periodic, or asked for).",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "squall_webhooks_reloads_total",
			Help: "New webhook sets published (ok), or reads of the directory that failed and kept the current set (error).",
		}, []string{"result"}),
		fileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "squall_webhooks_file_errors_total",
			Help: "Webhook files skipped when a new set was published, by reason (invalid, duplicate, unreadable).",
		}, []string{"reason"}),
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "squall_webhooks_loaded",
			Help: "Webhooks of the current set.",
		}, snap(func(s *Snapshot) float64 { return float64(len(s.Webhooks)) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "squall_webhooks_skipped_files",
			Help: "Webhook files left out of the current set (invalid, duplicate or unreadable).",
		}, snap(func(s *Snapshot) float64 { return float64(len(s.Problems)) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "squall_webhooks_generation",
			Help: "Number of webhook sets published since the start.",
		}, snap(func(s *Snapshot) float64 { return float64(s.Generation) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "squall_webhooks_last_reload_timestamp_seconds",
			Help: "When the current webhook set was read, in seconds since the Unix epoch.",
		}, snap(func(s *Snapshot) float64 { return float64(s.LoadedAt.UnixNano()) / 1e9 })),
	); err != nil {
		return nil, fmt.Errorf("register watcher metrics: %w", err)
	}
	return m, nil
}
