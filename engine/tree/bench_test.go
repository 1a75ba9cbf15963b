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

func benchTree(b *testing.B, ruleFile string) *Tree {
	b.Helper()
	r, err := config.DecodeRule(readFile(b, ruleFile))
	if err != nil {
		b.Fatal(err)
	}
	return mustCompile(b, rulesetTree(r))
}

func benchEvent(b *testing.B, file string) *Event {
	b.Helper()
	ev, err := DecodeEvent(readFile(b, file))
	if err != nil {
		b.Fatal(err)
	}
	return ev
}

const (
	fullMatchRule  = "tornado/benches_resources/full_match/rules/rule_01.json"
	fullMatchEvent = "tornado/benches_resources/full_match/events/event_01.json"
	noMatchRule    = "tornado/benches_resources/no_match/rules/rule_01.json"
	noMatchEvent   = "tornado/benches_resources/no_match/events/event_01.json"
)

// BenchmarkFullMatch is Tornado's worst-case bench: every condition,
// extraction and action of the rule is evaluated. The event is decoded.
func BenchmarkFullMatch(b *testing.B) {
	tr := benchTree(b, fullMatchRule)
	c := benchCounters(tr)
	ev := benchEvent(b, fullMatchEvent)
	var actions []Action
	b.ReportAllocs()
	for b.Loop() {
		actions = liveActions(tr, c, ev, actions[:0])
	}
	if len(actions) != 1 {
		b.Fatalf("%d actions", len(actions))
	}
	reportRate(b)
}

// BenchmarkFullMatchRaw is BenchmarkFullMatch from the raw event bytes.
func BenchmarkFullMatchRaw(b *testing.B) {
	tr := benchTree(b, fullMatchRule)
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
	tr := benchTree(b, noMatchRule)
	c := benchCounters(tr)
	ev := benchEvent(b, noMatchEvent)
	var actions []Action
	b.ReportAllocs()
	for b.Loop() {
		actions = liveActions(tr, c, ev, actions[:0])
	}
	if len(actions) != 0 {
		b.Fatalf("%d actions", len(actions))
	}
	reportRate(b)
}

// BenchmarkIterator runs the Alertmanager event (5 alerts) through Tornado's
// iterator fixture: 15 actions per event.
func BenchmarkIterator(b *testing.B) {
	tr := mustCompile(b, tornadoDir(b, "v2/test_config_iterator"))
	c := benchCounters(tr)
	ev := benchEvent(b, "tornado/openshift_webhook_event.json")
	var actions []Action
	b.ReportAllocs()
	for b.Loop() {
		actions = liveActions(tr, c, ev, actions[:0])
	}
	if len(actions) != 15 {
		b.Fatalf("%d actions", len(actions))
	}
	reportRate(b)
}

// largeTree has 1,000 rulesets of 10 rules under the root. Every rule of
// ruleset i requires ${event.type} equals "type_i" and extracts one
// variable with a regex, used by its action.
func largeTree(tb testing.TB) *config.Node {
	root := config.NewRoot()
	idx := 1
	for i := range 1000 {
		rs := &config.Node{Kind: config.KindRuleset, Name: fmt.Sprintf("ruleset_%d", i)}
		for j := range 10 {
			rs.Rules = append(rs.Rules, mustRule(tb, fmt.Sprintf(`{"name":"rule_%d","description":"","continue":true,"active":true,
				"constraint":{"WHERE":{"type":"AND","operators":[{"type":"equals","first":"${event.type}","second":"type_%d"},{"type":"contains","first":"${event.payload.host}","second":"srv"}]},
				"WITH":{"num":{"from":"${event.payload.host}","regex":{"match":"srv-([0-9]+)","group_match_idx":%d}}}},
				"actions":[{"id":"logger","payload":{"host":"${event.payload.host}","num":"${_variables.num}"}}]}`, j, i, idx)))
		}
		root.Children = append(root.Children, rs)
	}
	return root
}

// BenchmarkLargeTree evaluates events against largeTree; each event's type
// selects exactly one ruleset.
func BenchmarkLargeTree(b *testing.B) {
	tr := mustCompile(b, largeTree(b))
	c := benchCounters(tr)
	events := make([]*Event, 1000)
	for i := range events {
		events[i] = mustEvent(b, fmt.Sprintf(`{"type":"type_%d","created_ms":1,"payload":{"host":"srv-%d.example.com"}}`, i, i))
	}
	var actions []Action
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		actions = liveActions(tr, c, events[i%len(events)], actions[:0])
		i++
	}
	if len(actions) != 10 {
		b.Fatalf("%d actions", len(actions))
	}
	reportRate(b)
}

// BenchmarkProcess is the test-event path: the full result tree of the
// full-match event.
func BenchmarkProcess(b *testing.B) {
	tr := benchTree(b, fullMatchRule)
	ev := benchEvent(b, fullMatchEvent)
	b.ReportAllocs()
	for b.Loop() {
		tr.Process(ev)
	}
	reportRate(b)
}

// sizedTree is n rulesets of one rule each under the root; the rule of
// ruleset i requires ${event.type} equals "type_i", extracts with a regex
// and has one action.
func sizedTree(tb testing.TB, n int) *config.Node {
	root := config.NewRoot()
	for i := range n {
		rs := &config.Node{Kind: config.KindRuleset, Name: fmt.Sprintf("ruleset_%d", i)}
		rs.Rules = append(rs.Rules, mustRule(tb, fmt.Sprintf(`{"name":"rule","description":"","continue":true,"active":true,
			"constraint":{"WHERE":{"type":"AND","operators":[{"type":"equals","first":"${event.type}","second":"type_%d"},{"type":"contains","first":"${event.payload.host}","second":"srv"}]},
			"WITH":{"num":{"from":"${event.payload.host}","regex":{"match":"srv-([0-9]+)","group_match_idx":1}}}},
			"actions":[{"id":"logger","payload":{"host":"${event.payload.host}","num":"${_variables.num}"}}]}`, i)))
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
			events := make([]*Event, min(n, 1000))
			for i := range events {
				typ := i * (n / len(events))
				events[i] = mustEvent(b, fmt.Sprintf(`{"type":"type_%d","created_ms":1,"payload":{"host":"srv-%d.example.com"}}`, typ, i))
			}
			var actions []Action
			i := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				actions = liveActions(tr, c, events[i%len(events)], actions[:0])
				i++
			}
			if len(actions) != 1 {
				b.Fatalf("%d actions", len(actions))
			}
			reportRate(b)
			b.ReportMetric(float64(compile.Milliseconds()), "compile-ms")
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "tree-MiB")
			runtime.KeepAlive(tr)
			runtime.KeepAlive(node)
		})
	}
}
