package dedupe

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// metrics are the store's Prometheus metrics.
type metrics struct {
	evicted     prometheus.Counter
	writeErrors prometheus.Counter
}

// newMetrics builds the metrics, with a gauge that reads s, and registers
// them with reg; a nil reg registers nothing.
func newMetrics(reg prometheus.Registerer, s *Store) (*metrics, error) {
	m := &metrics{
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_dedupe_evicted_total",
			Help: "Delivery ids forgotten before the end of their window because the store reached its maximum number of entries.",
		}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_dedupe_write_errors_total",
			Help: "Groups of delivery ids that could not be written to the dedupe file (not remembered).",
		}),
	}
	if _, err := metricset.Register(reg,
		m.evicted, m.writeErrors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "squall_dedupe_entries",
			Help: "Delivery ids remembered for the webhooks' dedupe.",
		}, func() float64 { return float64(s.Len()) }),
	); err != nil {
		return nil, fmt.Errorf("register dedupe metrics: %w", err)
	}
	return m, nil
}
