package spool

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// metrics are the spool's Prometheus metrics.
type metrics struct {
	appended    prometheus.Counter
	committed   prometheus.Counter
	full        prometheus.Counter
	quarantined prometheus.Counter
	truncated   prometheus.Counter
	corrupt     prometheus.Counter
	fsync       prometheus.Histogram
}

// newMetrics builds the metrics, with gauges that read s, and registers them
// with reg; a nil reg registers nothing.
func newMetrics(reg prometheus.Registerer, s *Spool) (*metrics, error) {
	m := &metrics{
		appended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_spool_appended_total",
			Help: "Records written durably to the spool.",
		}),
		committed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_spool_committed_total",
			Help: "Records removed from the spool after their delivery.",
		}),
		full: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_spool_full_total",
			Help: "Appends refused because the spool had reached its maximum size.",
		}),
		quarantined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_spool_quarantined_total",
			Help: "Records moved to rejected.log because they could never be delivered.",
		}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_spool_truncated_bytes_total",
			Help: "Bytes of torn writes cut from segment ends when the spool was opened.",
		}),
		corrupt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "squall_spool_corrupt_segments_total",
			Help: "Segment files set aside because their header was damaged.",
		}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "squall_spool_fsync_duration_seconds",
			Help: "Duration of the fsync that makes appended records durable (one per group of appends).",
			// 50µs to ~1.6s.
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
		}),
	}
	stat := func(f func(Stats) int64) func() float64 {
		return func() float64 { return float64(f(s.Stats())) }
	}
	if _, err := metricset.Register(reg,
		m.appended, m.committed, m.full, m.quarantined, m.truncated, m.corrupt, m.fsync,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "squall_spool_records",
			Help: "Records in the spool waiting for delivery.",
		}, stat(func(st Stats) int64 { return st.Records })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "squall_spool_bytes",
			Help: "Bytes of the records waiting for delivery, frame headers included.",
		}, stat(func(st Stats) int64 { return st.Bytes })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "squall_spool_disk_bytes",
			Help: "Size of the segment files, delivered records not yet reclaimed included.",
		}, stat(func(st Stats) int64 { return st.DiskBytes })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "squall_spool_max_bytes",
			Help: "Largest allowed size of the segment files.",
		}, stat(func(st Stats) int64 { return st.MaxBytes })),
	); err != nil {
		return nil, fmt.Errorf("register spool metrics: %w", err)
	}
	return m, nil
}
