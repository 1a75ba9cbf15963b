package master_test

import (
	"slices"
	"testing"

	"github.com/squallhq/squall/master/mastertest"
)

// TestMetrics_seriesFromStart: the series that the alerting rules and the
// dashboard of deploy/ query exist from the start, at 0 if nothing
// happened, so that increase() sees their first increment and a rule
// over them is never silently empty.
func TestMetrics_seriesFromStart(t *testing.T) {
	t.Parallel()
	c := mastertest.TestCluster(t, 1)
	mfs, err := c.Registry(0).Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"squall_master_forwarded_requests_total":    {"error", "ok", "retry"},
		"squall_master_unavailable_responses_total": {"LEADER_LOST", "NOT_READY", "NO_LEADER", "UNAVAILABLE"},
	}
	got := map[string][]string{}
	for _, mf := range mfs {
		if _, ok := want[mf.GetName()]; !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				got[mf.GetName()] = append(got[mf.GetName()], l.GetValue())
			}
		}
	}
	for name, values := range want {
		slices.Sort(got[name])
		if !slices.Equal(got[name], values) {
			t.Errorf("%s: series %q, want %q", name, got[name], values)
		}
	}
}
