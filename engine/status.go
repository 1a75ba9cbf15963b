package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Readiness returns Ready, and the reasons and warnings of /readyz: why
// the engine is not ready (none when it is), and what a ready engine wants
// an operator to know (a refused tree, a failing tree watch). For the
// fleet heartbeat.
func (s *Service) Readiness() (ready bool, reasons, warnings []string) {
	reasons, warnings = s.readiness()
	if s.Ready() {
		return true, nil, warnings
	}
	return false, reasons, warnings
}

// ConsumerLag returns the lag of the assigned partitions, summed (the
// squall_engine_partition_lag gauges); false before a record was fetched
// from any of them. It reads the gauges the fetch loop sets and takes no
// lock of the data path.
func (s *Service) ConsumerLag() (int64, bool) { return sumGauges(s.m.lag) }

// sumGauges adds the values of a gauge vector's children; it reports
// false when it has none.
func sumGauges(vec *prometheus.GaugeVec) (int64, bool) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		vec.Collect(ch)
		close(ch)
	}()
	var sum float64
	n := 0
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil && d.Gauge != nil {
			sum += d.Gauge.GetValue()
			n++
		}
	}
	return int64(sum), n > 0
}
