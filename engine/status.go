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

// Ownership is an engine's place in its consumer group, for the fleet
// heartbeat: the masters compare the partitions the engines of a group
// own with the topic's partition count.
type Ownership struct {
	Group, Topic string
	// Partitions are the partitions assigned to the engine in the running
	// generation; none while it is not in the group.
	Partitions []int
	// TopicPartitions is the topic's partition count, as read from the
	// brokers at the start of the last generation; 0 when unknown.
	TopicPartitions int
}

// Ownership returns the engine's consumer group, topic and partitions.
func (s *Service) Ownership() Ownership {
	o := Ownership{Group: s.cfg.Group, Topic: s.cfg.Topic}
	if a := s.assignment.Load(); a != nil && a.Joined {
		o.Partitions = a.Partitions
	}
	if src := s.source.Load(); src != nil {
		o.TopicPartitions, _ = src.TopicPartitions()
	}
	return o
}
