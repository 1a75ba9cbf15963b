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
		evicted:     metricset.Counter("squall_dedupe_evicted_total", "Delivery ids forgotten before the end of their window because the store reached its maximum number of entries."),
		writeErrors: metricset.Counter("squall_dedupe_write_errors_total", "Groups of delivery ids that could not be written to the dedupe file (not remembered)."),
	}
	if _, err := metricset.Register(reg,
		m.evicted, m.writeErrors,
		metricset.GaugeFunc("squall_dedupe_entries", "Delivery ids remembered for the webhooks' dedupe.", func() float64 { return float64(s.Len()) }),
	); err != nil {
		return nil, fmt.Errorf("register dedupe metrics: %w", err)
	}
	return m, nil
}
