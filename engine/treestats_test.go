package engine

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/tree"
)

// TestRulesetCollector: the first rulesets of the budget, in tree order,
// have their own label; the others are summed as "other"; nothing is
// served before a tree.
func TestRulesetCollector(t *testing.T) {
	t.Parallel()
	rule := func(name, typ string) *config.Rule {
		return &config.Rule{Name: name, Active: true, Continue: true, Where: &config.Operator{Type: config.OpEquals, First: "${event.type}", Second: typ},
			Actions: []*config.Action{{ID: "a", Payload: map[string]any{}}}}
	}
	root := config.NewRoot()
	for _, name := range []string{"a", "b", "c", "d"} {
		root.Children = append(root.Children, &config.Node{Kind: config.KindRuleset, Name: name, Rules: []*config.Rule{rule("r", name)}})
	}
	tr, err := tree.Compile(root)
	if err != nil {
		t.Fatal(err)
	}
	c := tr.NewCounters()
	for _, typ := range []string{"a", "a", "b", "c", "d", "d", "x"} {
		ev, err := tree.DecodeEvent([]byte(`{"type": "` + typ + `", "created_ms": 1, "payload": {}}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range c.Actions(ev, nil, 5) {
			c.ActionDone(&a, typ != "d")
		}
	}
	var st *TreeStats
	stats := func() (TreeStats, bool) {
		if st == nil {
			return TreeStats{}, false
		}
		return *st, true
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newRulesetCollector(2, stats))
	value := func(name string, labels map[string]string) (float64, int) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var v float64
		series := 0
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				series++
				match := true
				for _, l := range m.GetLabel() {
					if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
						match = false
					}
				}
				if match {
					v += m.GetCounter().GetValue()
				}
			}
		}
		return v, series
	}
	if _, n := value("squall_engine_ruleset_evaluations_total", nil); n != 0 {
		t.Fatalf("%d series before a tree", n)
	}
	st = &TreeStats{TreeIndex: 3, Instance: "i", Loaded: time.Now(), Stats: tr.Stats(c)}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
		series int
	}{
		{"squall_engine_ruleset_evaluations_total", map[string]string{"ruleset": "root.a"}, 7, 3},
		{"squall_engine_ruleset_evaluations_total", map[string]string{"ruleset": "other"}, 14, 3},
		{"squall_engine_ruleset_rule_matches_total", map[string]string{"ruleset": "root.a"}, 2, 3},
		{"squall_engine_ruleset_rule_matches_total", map[string]string{"ruleset": "root.b"}, 1, 3},
		{"squall_engine_ruleset_rule_matches_total", map[string]string{"ruleset": "other"}, 3, 3},
		{"squall_engine_ruleset_actions_total", map[string]string{"ruleset": "other", "outcome": "failed"}, 2, 6},
		{"squall_engine_ruleset_actions_total", map[string]string{"ruleset": "other", "outcome": "succeeded"}, 1, 6},
	} {
		if got, n := value(tc.name, tc.labels); got != tc.want || n != tc.series {
			t.Errorf("%s%v = %v in %d series, want %v in %d", tc.name, tc.labels, got, n, tc.want, tc.series)
		}
	}
}
