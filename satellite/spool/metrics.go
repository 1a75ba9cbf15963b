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
		appended:    metricset.Counter("squall_spool_appended_total", "Records written durably to the spool."),
		committed:   metricset.Counter("squall_spool_committed_total", "Records removed from the spool after their delivery."),
		full:        metricset.Counter("squall_spool_full_total", "Appends refused because the spool had reached its maximum size."),
		quarantined: metricset.Counter("squall_spool_quarantined_total", "Records moved to rejected.log because they could never be delivered."),
		truncated:   metricset.Counter("squall_spool_truncated_bytes_total", "Bytes of torn writes cut from segment ends when the spool was opened."),
		corrupt:     metricset.Counter("squall_spool_corrupt_segments_total", "Segment files set aside because their header was damaged."),
		// 50µs to ~1.6s.
		fsync: metricset.Histogram("squall_spool_fsync_duration_seconds", "Duration of the fsync that makes appended records durable (one per group of appends).", prometheus.ExponentialBuckets(0.00005, 2, 16)),
	}
	stat := func(f func(Stats) int64) func() float64 {
		return func() float64 { return float64(f(s.Stats())) }
	}
	if _, err := metricset.Register(reg,
		m.appended, m.committed, m.full, m.quarantined, m.truncated, m.corrupt, m.fsync,
		metricset.GaugeFunc("squall_spool_records", "Records in the spool waiting for delivery.", stat(func(st Stats) int64 { return st.Records })),
		metricset.GaugeFunc("squall_spool_bytes", "Bytes of the records waiting for delivery, frame headers included.", stat(func(st Stats) int64 { return st.Bytes })),
		metricset.GaugeFunc("squall_spool_disk_bytes", "Size of the segment files, delivered records not yet reclaimed included.", stat(func(st Stats) int64 { return st.DiskBytes })),
		metricset.GaugeFunc("squall_spool_max_bytes", "Largest allowed size of the segment files.", stat(func(st Stats) int64 { return st.MaxBytes })),
	); err != nil {
		return nil, fmt.Errorf("register spool metrics: %w", err)
	}
	return m, nil
}
