package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSum(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"action", "reason"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "g"})
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"}, []string{"action"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("http", "permanent").Add(2)
	c.WithLabelValues("http", "exhausted").Add(3)
	c.WithLabelValues("kafka", "permanent").Add(5)
	g.Set(7)
	h.WithLabelValues("http").Observe(1)
	h.WithLabelValues("http").Observe(2)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"c_total", nil, 10},
		{"c_total", map[string]string{"action": "http"}, 5},
		{"c_total", map[string]string{"action": "http", "reason": "exhausted"}, 3},
		{"c_total", map[string]string{"action": "x"}, 0},
		{"c_total", map[string]string{"other": "x"}, 0},
		{"g", nil, 7},
		{"h_seconds", map[string]string{"action": "http"}, 2},
		{"missing", nil, 0},
	} {
		if got := Sum(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
