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
