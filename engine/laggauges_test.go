package engine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/engine/kafkasource"
)

// TestLagGauges_set: a record fetched before the first assignment is known
// sets its partition's gauge (and does not panic); once the assignment is
// known, only its partitions' gauges are set.
func TestLagGauges_set(t *testing.T) {
	t.Parallel()
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lag"}, []string{"partition"})
	l := lagGauges{vec: vec}
	// Before the first assignment is known, the message's partition is
	// one kafka-go was assigned.
	l.set(nil, 0, 5)
	if got := vecValues(t, vec); len(got) != 1 || got[0] != 5 {
		t.Fatalf("gauges %v before the assignment is known, want [5]", got)
	}
	l.set(&kafkasource.Assignment{Joined: true, Partitions: []int{0}}, 0, 7)
	if got := vecValues(t, vec); len(got) != 1 || got[0] != 7 {
		t.Fatalf("gauges %v, want [7]", got)
	}
	// A message of a partition outside the assignment sets nothing.
	l.set(&kafkasource.Assignment{Joined: true, Partitions: []int{0}}, 1, 3)
	if got := vecValues(t, vec); len(got) != 1 || got[0] != 7 {
		t.Fatalf("gauges %v after a partition outside the assignment, want [7]", got)
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
