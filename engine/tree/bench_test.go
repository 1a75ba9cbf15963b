package tree

import (
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
)

// benchCounted makes the benchmarks evaluate as the engine does, counting
// in Counters (docs/BENCHMARKS.md compares both):
// go test ./engine/tree -run '^$' -bench 'FullMatch|NoMatch|LargeTree' -tree.counted
var benchCounted = flag.Bool("tree.counted", false, "evaluate through Counters.Actions, as the engine does")

// benchCounters returns the counters of tr's evaluations with
// -tree.counted, else nil.
func benchCounters(tr *Tree) *Counters {
	if !*benchCounted {
		return nil
	}
	return tr.NewCounters()
}

// liveActions evaluates ev with c when set, else with tr.
func liveActions(tr *Tree, c *Counters, ev *Event, dst []Action) []Action {
	if c != nil {
		return c.Actions(ev, dst, 1)
	}
	return tr.Actions(ev, dst)
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// benchActions evaluates ev with tr (through c when set) until the
// benchmark ends, checks that the last evaluation gave want actions and
// reports events/s.
func benchActions(b *testing.B, tr *Tree, c *Counters, ev *Event, want int) {
	var actions []Action
	b.ReportAllocs()
	for b.Loop() {
		actions = liveActions(tr, c, ev, actions[:0])
	}
	if len(actions) != want {
		b.Fatalf("%d actions, want %d", len(actions), want)
	}
	reportRate(b)
}

// benchActionsCycling is benchActions over events in turn.
func benchActionsCycling(b *testing.B, tr *Tree, c *Counters, events []*Event, want int) {
	var actions []Action
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		actions = liveActions(tr, c, events[i%len(events)], actions[:0])
		i++
	}
	if len(actions) != want {
		b.Fatalf("%d actions, want %d", len(actions), want)
	}
	reportRate(b)
}

// BenchmarkFullMatch is Tornado's worst-case bench: every condition,
// extraction and action of the rule is evaluated. The event is decoded.
func BenchmarkFullMatch(b *testing.B) {
	tr := ruleFileTree(b, fullMatchRule, "")
	benchActions(b, tr, benchCounters(tr), eventFile(b, fullMatchEvent), 1)
}

// BenchmarkFullMatchRaw is BenchmarkFullMatch from the raw event bytes.
func BenchmarkFullMatchRaw(b *testing.B) {
	tr := ruleFileTree(b, fullMatchRule, "")
	c := benchCounters(tr)
	raw := readFile(b, fullMatchEvent)
	var actions []Action
	b.ReportAllocs()
	for b.Loop() {
		ev, err := DecodeEvent(raw)
		if err != nil {
			b.Fatal(err)
		}
		actions = liveActions(tr, c, ev, actions[:0])
	}
	if len(actions) != 1 {
		b.Fatalf("%d actions", len(actions))
	}
	reportRate(b)
}

// BenchmarkDecode is the standard library's floor: encoding/json decoding
// the full-match event into map[string]any.
func BenchmarkDecode(b *testing.B) {
	raw := readFile(b, fullMatchEvent)
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}

// BenchmarkNoMatch is Tornado's best case: one rule whose condition on the
// event type fails.
func BenchmarkNoMatch(b *testing.B) {
	tr := ruleFileTree(b, noMatchRule, "")
	benchActions(b, tr, benchCounters(tr), eventFile(b, noMatchEvent), 0)
}

// BenchmarkIterator runs the Alertmanager event (5 alerts) through Tornado's
// iterator fixture: 15 actions per event.
func BenchmarkIterator(b *testing.B) {
	tr := mustCompile(b, tornadoDir(b, "v2/test_config_iterator"))
	benchActions(b, tr, benchCounters(tr), eventFile(b, "tornado/openshift_webhook_event.json"), 15)
}

// BenchmarkLargeTree evaluates events against 1,000 rulesets of 10
// rules (scaleTree); each event's type selects exactly one ruleset.
func BenchmarkLargeTree(b *testing.B) {
	tr := mustCompile(b, scaleTree(b, 10_000))
	benchActionsCycling(b, tr, benchCounters(tr), spreadEvents(b, 1000), 10)
}

// BenchmarkProcess is the test-event path: the full result tree of the
// full-match event.
func BenchmarkProcess(b *testing.B) {
	tr := ruleFileTree(b, fullMatchRule, "")
	ev := eventFile(b, fullMatchEvent)
	b.ReportAllocs()
	for b.Loop() {
		tr.Process(ev)
	}
	reportRate(b)
}

// benchRule is the rule name of ruleset i of the benchmark trees: it
// requires ${event.type} equals "type_i", checks the host, extracts one
// variable from it with a regex and has one action, which uses it.
func benchRule(tb testing.TB, name string, ruleset int) *config.Rule {
	return mustRule(tb, fmt.Sprintf(`{"name":%q,"description":"","continue":true,"active":true,
		"constraint":{"WHERE":{"type":"AND","operators":[{"type":"equals","first":"${event.type}","second":"type_%d"},{"type":"contains","first":"${event.payload.host}","second":"srv"}]},
		"WITH":{"num":{"from":"${event.payload.host}","regex":{"match":"srv-([0-9]+)","group_match_idx":1}}}},
		"actions":[{"id":"logger","payload":{"host":"${event.payload.host}","num":"${_variables.num}"}}]}`, name, ruleset))
}

// typedEvent is an event of type "type_<typ>" (it selects ruleset typ of
// the benchmark trees) from the host srv-<host>.example.com.
func typedEvent(tb testing.TB, typ, host int) *Event {
	return mustEvent(tb, fmt.Sprintf(`{"type":"type_%d","created_ms":1,"payload":{"host":"srv-%d.example.com"}}`, typ, host))
}

// spreadEvents returns up to 1,000 events whose types are spread evenly
// over n rulesets of the benchmark trees: event i selects ruleset
// i*(n/len), from host i.
func spreadEvents(tb testing.TB, n int) []*Event {
	events := make([]*Event, min(n, 1000))
	for i := range events {
		events[i] = typedEvent(tb, i*(n/len(events)), i)
	}
	return events
}

// sizedTree is n rulesets of one rule each under the root, the rule of
// ruleset i benchRule "rule".
func sizedTree(tb testing.TB, n int) *config.Node {
	root := config.NewRoot()
	for i := range n {
		rs := &config.Node{Kind: config.KindRuleset, Name: fmt.Sprintf("ruleset_%d", i)}
		rs.Rules = append(rs.Rules, benchRule(tb, "rule", i))
		root.Children = append(root.Children, rs)
	}
	return root
}

// BenchmarkTreeSize evaluates events against trees of 1 to 100,000 rules
// (sizedTree), each event selecting one ruleset: the cost per event should
// follow what matches, not the size (issue 17: 100,000 rules at most 3× one
// rule). Events cycle over 1,000 types spread over the whole tree, so that
// a large tree is not evaluated from a warm cache only. It also reports
// the compile time and the heap the compiled tree holds.
//
//	go test ./engine/tree -run '^$' -bench TreeSize -benchtime 1s -count 5
func BenchmarkTreeSize(b *testing.B) {
	for _, n := range []int{1, 100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			node := sizedTree(b, n)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			tr := mustCompile(b, node)
			c := benchCounters(tr)
			compile := time.Since(start)
			runtime.GC()
			runtime.ReadMemStats(&after)
			benchActionsCycling(b, tr, c, spreadEvents(b, n), 1)
			b.ReportMetric(float64(compile.Milliseconds()), "compile-ms")
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "tree-MiB")
			runtime.KeepAlive(tr)
			runtime.KeepAlive(node)
		})
	}
}
