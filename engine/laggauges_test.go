package engine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/engine/kafkasource"
)

// TestLagGauges_set: a record fetched before the first assignment is known
// sets no gauge (and does not panic); once the partition is assigned, its
// gauge is set.
func TestLagGauges_set(t *testing.T) {
	t.Parallel()
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lag"}, []string{"partition"})
	l := lagGauges{vec: vec}
	l.set(nil, 0, 5)
	if n := len(vecValues(t, vec)); n != 0 {
		t.Fatalf("%d gauges before any assignment, want 0", n)
	}
	l.set(&kafkasource.Assignment{Joined: true, Partitions: []int{0}}, 0, 7)
	if got := vecValues(t, vec); len(got) != 1 || got[0] != 7 {
		t.Fatalf("gauges %v, want [7]", got)
	}
}

func vecValues(t *testing.T, vec *prometheus.GaugeVec) []float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(vec); err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister(vec)
	var out []float64
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out = append(out, m.GetGauge().GetValue())
		}
	}
	return out
}
