// Package metricset registers a component's Prometheus collectors as one
// set: all of them or none, and unregistered together when the component
// closes, so that its successor (after a reload or a restart in the same
// process) can register its own.
package metricset

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Set is collectors registered together. The zero Set, and a nil one,
// registered nothing.
type Set struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector
}

// Register registers cs with reg, in order. If one fails, it unregisters
// those registered before it and returns the error. A nil reg registers
// nothing.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) (*Set, error) {
	if reg == nil {
		return &Set{}, nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return &Set{reg: reg, collectors: cs}, nil
}

// Unregister removes the set's collectors from the registry.
func (s *Set) Unregister() {
	if s == nil || s.reg == nil {
		return
	}
	for _, c := range s.collectors {
		s.reg.Unregister(c)
	}
}

// NewRegistry returns a registry with the Go runtime's and the process's
// collectors, which every binary serves on /metrics.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Resolve completes a component's Registerer and Gatherer: with neither, a
// new registry from NewRegistry serves both; with only a Registerer, it
// must also be the Gatherer; a Gatherer alone is an error.
func Resolve(reg prometheus.Registerer, gath prometheus.Gatherer) (prometheus.Registerer, prometheus.Gatherer, error) {
	if reg == nil && gath == nil {
		r := NewRegistry()
		return r, r, nil
	}
	if reg == nil {
		return nil, nil, errors.New("a Gatherer needs a Registerer")
	}
	if gath == nil {
		g, ok := reg.(prometheus.Gatherer)
		if !ok {
			return nil, nil, errors.New("the Registerer is not a Gatherer: set Config.Gatherer")
		}
		gath = g
	}
	return reg, gath, nil
}

// Counter returns a counter named name.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec returns a counter named name with the labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge returns a gauge named name.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// GaugeVec returns a gauge named name with the labels.
func GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// Histogram returns a histogram named name with the buckets (nil:
// Prometheus's default buckets).
func Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// HistogramVec returns a histogram named name with the buckets (nil:
// Prometheus's default buckets) and the labels.
func HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// GaugeFunc returns a gauge named name whose value fn reads when scraped.
func GaugeFunc(name, help string, fn func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
}
