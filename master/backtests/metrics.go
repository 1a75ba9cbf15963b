package backtests

import (
	"github.com/prometheus/client_golang/prometheus"
)

var backtestsDesc = prometheus.NewDesc("squall_master_backtests",
	"Backtests kept, by state (pending, running, succeeded, failed, cancelled): the leader's; on the other masters 0 below feature level 7, the finished ones from it.",
	[]string{"state"}, nil)

var _ prometheus.Collector = (*API)(nil)

// Describe sends the description of squall_master_backtests.
func (a *API) Describe(ch chan<- *prometheus.Desc) { ch <- backtestsDesc }

// Collect sends the backtests kept by state, every state included.
func (a *API) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{StatePending: 0, StateRunning: 0, StateSucceeded: 0, StateFailed: 0, StateCancelled: 0}
	bs, _ := a.list() // a failed read counts none
	for _, b := range bs {
		counts[b.State]++
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(backtestsDesc, prometheus.GaugeValue, float64(n), state)
	}
}
