package tree

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/internal/heaptest"
)

// scaleTree has n rules in rulesets of 10 under the root (one ruleset
// below 10 rules), the rules of ruleset i benchRule "rule_0" to "rule_9":
// an event of type_i matches the 10 rules of ruleset i.
func scaleTree(tb testing.TB, n int) *config.Node {
	root := config.NewRoot()
	per := min(n, 10)
	for i := range n / per {
		rs := &config.Node{Kind: config.KindRuleset, Name: fmt.Sprintf("ruleset_%d", i)}
		for j := range per {
			rs.Rules = append(rs.Rules, benchRule(tb, fmt.Sprintf("rule_%d", j), i))
		}
		root.Children = append(root.Children, rs)
	}
	return root
}

var scaleRules = []int{10, 100, 1_000, 10_000, 100_000}

// BenchmarkScaleTree is the tree-size curve of docs/BENCHMARKS.md: for
// 10 to 100,000 rules, compile (ns/op, and tree-MiB: the heap the
// compiled tree keeps) and evaluate (one event that selects one ruleset
// of 10 rules, its 10 actions resolved: ns/op and events/s).
//
//	go test ./engine/tree -run '^$' -bench BenchmarkScaleTree -benchtime 2x   # compile
//	go test ./engine/tree -run '^$' -bench 'BenchmarkScaleTree/.*/evaluate'     # evaluate
func BenchmarkScaleTree(b *testing.B) {
	for _, n := range scaleRules {
		model := scaleTree(b, n)
		b.Run(fmt.Sprintf("rules=%d/compile", n), func(b *testing.B) {
			before := heaptest.Live()
			tr := mustCompile(b, model)
			kept := heaptest.Live() - min(before, heaptest.Live())
			runtime.KeepAlive(tr)
			b.ReportAllocs()
			for b.Loop() {
				mustCompile(b, model)
			}
			b.ReportMetric(float64(kept)/(1<<20), "tree-MiB")
		})
		b.Run(fmt.Sprintf("rules=%d/evaluate", n), func(b *testing.B) {
			tr := mustCompile(b, model)
			sets := max(n/10, 1)
			events := make([]*Event, min(sets, 1000))
			for i := range events {
				k := i * sets / len(events)
				events[i] = typedEvent(b, k, k)
			}
			benchActionsCycling(b, tr, nil, events, min(n, 10))
		})
	}
}
