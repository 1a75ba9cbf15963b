package tree

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/squallhq/squall/config"
)

// scaleTree has n rules in rulesets of 10 under the root (one ruleset
// below 10 rules). Every rule of ruleset i requires ${event.type} equals
// "type_i", checks the host and extracts one variable with a regex, used
// by its action: an event of type_i matches the 10 rules of ruleset i.
func scaleTree(tb testing.TB, n int) *config.Node {
	root := config.NewRoot()
	per := min(n, 10)
	for i := range n / per {
		rs := &config.Node{Kind: config.KindRuleset, Name: fmt.Sprintf("ruleset_%d", i)}
		for j := range per {
			rs.Rules = append(rs.Rules, mustRule(tb, fmt.Sprintf(`{"name":"rule_%d","description":"","continue":true,"active":true,
				"constraint":{"WHERE":{"type":"AND","operators":[{"type":"equals","first":"${event.type}","second":"type_%d"},{"type":"contains","first":"${event.payload.host}","second":"srv"}]},
				"WITH":{"num":{"from":"${event.payload.host}","regex":{"match":"srv-([0-9]+)","group_match_idx":1}}}},
				"actions":[{"id":"logger","payload":{"host":"${event.payload.host}","num":"${_variables.num}"}}]}`, j, i)))
		}
		root.Children = append(root.Children, rs)
	}
	return root
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
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
			before := heapInUse()
			tr := mustCompile(b, model)
			kept := heapInUse() - min(before, heapInUse())
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
				events[i] = mustEvent(b, fmt.Sprintf(`{"type":"type_%d","created_ms":1,"payload":{"host":"srv-%d.example.com"}}`, k, k))
			}
			var actions []Action
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				actions = tr.Actions(events[i%len(events)], actions[:0])
				i++
			}
			if len(actions) != min(n, 10) {
				b.Fatalf("%d actions", len(actions))
			}
			reportRate(b)
		})
	}
}
