package backtests

import (
	"github.com/prometheus/client_golang/prometheus"
)

var backtestsDesc = prometheus.NewDesc("squall_master_backtests",
	"Backtests the leader keeps, by state (pending, running, succeeded, failed, cancelled); 0 on the other masters, which keep none.",
	[]string{"state"}, nil)

var _ prometheus.Collector = (*API)(nil)

// Describe sends the description of squall_master_backtests.
func (a *API) Describe(ch chan<- *prometheus.Desc) { ch <- backtestsDesc }

// Collect sends the backtests kept by state, every state included.
func (a *API) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{StatePending: 0, StateRunning: 0, StateSucceeded: 0, StateFailed: 0, StateCancelled: 0}
	for _, b := range a.reg.list(a.cfg.Now()) {
		counts[b.State]++
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(backtestsDesc, prometheus.GaugeValue, float64(n), state)
	}
}
