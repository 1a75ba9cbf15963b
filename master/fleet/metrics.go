package fleet

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the list, computed when scraped from the heartbeats the
// leader holds (a follower exposes no series).
var (
	unownedDesc = prometheus.NewDesc("squall_fleet_partitions_unowned",
		"Partitions of a consumer group's topic that no live engine (one that reported within --fleet-stale-after) owns, on the leader.",
		[]string{"group", "topic"}, nil)
	groupEnginesDesc = prometheus.NewDesc("squall_fleet_group_engines",
		"Live engines (reported within --fleet-stale-after) of a consumer group, on the leader.",
		[]string{"group", "topic"}, nil)
)

var _ prometheus.Collector = (*Fleet)(nil)

// Describe sends the descriptions of the list's metrics.
func (f *Fleet) Describe(ch chan<- *prometheus.Desc) {
	ch <- unownedDesc
	ch <- groupEnginesDesc
}

// Collect sends, per consumer group the engines reported, its partitions
// without a live owner and its live engines.
func (f *Fleet) Collect(ch chan<- prometheus.Metric) {
	for _, g := range f.Groups(time.Now()) {
		ch <- prometheus.MustNewConstMetric(unownedDesc, prometheus.GaugeValue, float64(len(g.Unowned)), g.Group, g.Topic)
		ch <- prometheus.MustNewConstMetric(groupEnginesDesc, prometheus.GaugeValue, float64(g.Engines), g.Group, g.Topic)
	}
}
