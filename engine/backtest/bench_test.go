package backtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/cputime"
	"github.com/squallhq/squall/internal/kafkatest"
)

// Shape of benchTree.
const (
	benchTenants  = 10
	benchRulesets = 5
	benchRules    = 4
)

// benchTree is a tree routed by tenant, as deployments write them:
// benchTenants tenant filters, each with benchRulesets rulesets of
// benchRules rules in the shape of Tornado's full-match rule (an equals on
// the type, a contains and a regex on the host, a regex extraction, an
// action using the variable). With changed, the first two rules of the
// first tenant's first ruleset test another type.
func benchTree(tb testing.TB, changed bool) *config.Node {
	tb.Helper()
	root := config.NewRoot()
	for t := range benchTenants {
		f := &config.Node{Kind: config.KindFilter, Name: fmt.Sprintf("tenant_%d", t), Active: true,
			Filter: &config.Operator{Type: config.OpEquals, First: "${event.metadata.tenant_id}", Second: fmt.Sprintf("tenant_%d", t)}}
		for s := range benchRulesets {
			rs := &config.Node{Kind: config.KindRuleset, Name: fmt.Sprintf("ruleset_%d", s)}
			for r := range benchRules {
				typ := fmt.Sprintf("type_%d", (s*benchRules+r)%10)
				if changed && t == 0 && s == 0 && r < 2 {
					typ = "type_changed"
				}
				rule, err := config.DecodeRule(fmt.Appendf(nil, `{"name":"rule_%d","description":"","continue":true,"active":true,
					"constraint":{"WHERE":{"type":"AND","operators":[
						{"type":"equals","first":"${event.type}","second":%q},
						{"type":"contains","first":"${event.payload.host}","second":"srv"},
						{"type":"regex","regex":"srv-[0-9]+","target":"${event.payload.host}"}]},
					"WITH":{"num":{"from":"${event.payload.host}","regex":{"match":"srv-([0-9]+)","group_match_idx":1}}}},
					"actions":[{"id":"logger","payload":{"host":"${event.payload.host}","num":"${_variables.num}","tenant":"${event.metadata.tenant_id}"}}]}`, r, typ))
				if err != nil {
					tb.Fatal(err)
				}
				rs.Rules = append(rs.Rules, rule)
			}
			f.Children = append(f.Children, rs)
		}
		root.Children = append(root.Children, f)
	}
	return root
}

// benchEvents are 1,000 events spread over the tenants and types, about
// 1 KB each.
func benchEvents() [][]byte {
	out := make([][]byte, 1000)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"type":"type_%d","created_ms":1700000000000,"metadata":{"tenant_id":"tenant_%d"},
			"payload":{"host":"srv-%d.example.com","severity":"warning","message":"%0800d"}}`, i%10, i%benchTenants, i, i)
	}
	return out
}

// BenchmarkBacktest_evaluate is the CPU cost of one event of a backtest:
// decode, evaluate with both trees as test events, count, compare. Its
// baseline, test-event, is what a test event costs: decode and evaluate
// with one tree ([tree.Tree.Process]).
//
//	go test ./engine/backtest -run '^$' -bench Backtest_evaluate -benchtime 100000x -count 5
func BenchmarkBacktest_evaluate(b *testing.B) {
	bt, err := New(nil, Spec{Active: benchTree(b, false), Candidate: benchTree(b, true), Topic: "t", Range: Range{Last: 1}})
	if err != nil {
		b.Fatal(err)
	}
	events := benchEvents()
	b.Run("backtest", func(b *testing.B) {
		c := newCounter(bt)
		measure(b, events, func(ev []byte) { c.count(ev) })
		if c.differing == 0 || c.undecodable != 0 {
			b.Fatalf("%d differing, %d undecodable", c.differing, c.undecodable)
		}
	})
	b.Run("test-event", func(b *testing.B) {
		measure(b, events, func(ev []byte) {
			e, err := tree.DecodeEvent(ev)
			if err != nil {
				b.Fatal(err)
			}
			bt.sides[0].tree.Process(e)
		})
	})
}

// measure calls fn with the events in turn and reports the rate and the
// process's CPU time per event.
func measure(b *testing.B, events [][]byte, fn func([]byte)) {
	i := 0
	b.ReportAllocs()
	cpu0, _ := cputime.Process()
	for b.Loop() {
		fn(events[i%len(events)])
		i++
	}
	cpu1, _ := cputime.Process()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/event")
}

// BenchmarkBacktest_kafka is a whole backtest of 100,000 events from an
// in-process broker (the broker's CPU included).
//
//	go test ./engine/backtest -run '^$' -bench Backtest_kafka -benchtime 1x -count 5
func BenchmarkBacktest_kafka(b *testing.B) {
	const n = 100_000
	br := kafkatest.Start(b, kafkatest.Config{Topics: []string{testTopic}, Partitions: 3})
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: testDial(br.Addr), Topic: testTopic})
	if err != nil {
		b.Fatal(err)
	}
	events := benchEvents()
	recs := make([]kafkasource.Record, 0, 1000)
	for i := 0; i < n; i += len(recs) {
		recs = recs[:0]
		for j := range 1000 {
			recs = append(recs, kafkasource.Record{Value: events[j], ToPartition: true, Partition: (i + j) % 3})
		}
		if err := w.Write(b.Context(), recs...); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	r, err := kafkasource.NewReader(testDial(br.Addr))
	if err != nil {
		b.Fatal(err)
	}
	active, candidate := benchTree(b, false), benchTree(b, true)
	var events64 int64
	var elapsed time.Duration
	cpu0, _ := cputime.Process()
	b.ResetTimer()
	for b.Loop() {
		bt, err := New(r, Spec{Active: active, Candidate: candidate, Topic: testTopic, Range: Range{Last: n}})
		if err != nil {
			b.Fatal(err)
		}
		res, err := bt.Run(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if res.Events != n {
			b.Fatalf("%d events", res.Events)
		}
		events64 += res.Events
		elapsed += res.Elapsed
	}
	cpu1, _ := cputime.Process()
	b.ReportMetric(float64(events64)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(events64), "cpu-µs/event")
}
