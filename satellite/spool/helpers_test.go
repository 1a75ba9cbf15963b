package spool

import (
	"runtime"

	dto "github.com/prometheus/client_model/go"
)

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// testFsyncs is the number of fsyncs s observed.
func testFsyncs(s *Spool) float64 {
	var m dto.Metric
	if err := s.m.fsync.Write(&m); err != nil {
		return 0
	}
	return float64(m.GetHistogram().GetSampleCount())
}
