package tree

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/cputime"
)

// side is one of the two workloads a ratio benchmark interleaves.
type side struct {
	name string
	op   func(i int)
	cpu  time.Duration
	wall time.Duration
	n    int
}

// interleave runs a and b in 10 alternating rounds of b.N/10 operations
// each, and reports each side's CPU time (getrusage: what the neighbours of
// a shared machine change least) and wall time per operation, and the
// ratio a/b of both.
func interleave(b *testing.B, x, y *side) {
	const rounds = 10
	per := max(b.N/rounds, 1)
	for i := range 2 * rounds {
		s := x
		if i%2 == 1 {
			s = y
		}
		c0, ok := cputime.Process()
		t0 := time.Now()
		for k := range per {
			s.op(s.n + k)
		}
		s.wall += time.Since(t0)
		if c1, ok1 := cputime.Process(); ok && ok1 {
			s.cpu += c1 - c0
		}
		s.n += per
	}
	for _, s := range []*side{x, y} {
		b.ReportMetric(float64(s.cpu.Nanoseconds())/float64(s.n), s.name+"-cpu-ns/op")
		b.ReportMetric(float64(s.wall.Nanoseconds())/float64(s.n), s.name+"-ns/op")
	}
	if y.cpu > 0 {
		b.ReportMetric((float64(x.cpu)/float64(x.n))/(float64(y.cpu)/float64(y.n)), "cpu-ratio")
	}
	b.ReportMetric((float64(x.wall)/float64(x.n))/(float64(y.wall)/float64(y.n)), "wall-ratio")
}

// BenchmarkRatio measures the ratios of issue 17, item 4, each in one run
// with the two sides interleaved:
//
//   - raw/decode: the full-match event from its raw bytes to its actions
//     (BenchmarkFullMatchRaw) against encoding/json decoding the same bytes
//     into map[string]any (BenchmarkDecode); target ≤ 0.3.
//
//   - 100000/1: BenchmarkTreeSize's 100,000-rule tree against its 1-rule
//     tree, each event selecting one ruleset; target ≤ 3.
//
//     go test ./engine/tree -run '^$' -bench Ratio -benchtime 200000x -count 5
func BenchmarkRatio(b *testing.B) {
	b.Run("raw/decode", func(b *testing.B) {
		tr := ruleFileTree(b, fullMatchRule, "")
		raw := readFile(b, fullMatchEvent)
		var actions []Action
		x := &side{name: "raw", op: func(int) {
			ev, err := DecodeEvent(raw)
			if err != nil {
				b.Fatal(err)
			}
			actions = tr.Actions(ev, actions[:0])
		}}
		y := &side{name: "decode", op: func(int) {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				b.Fatal(err)
			}
		}}
		b.ReportAllocs()
		interleave(b, x, y)
		if len(actions) != 1 {
			b.Fatalf("%d actions", len(actions))
		}
	})
	b.Run("100000/1", func(b *testing.B) {
		sides := make([]*side, 0, 2)
		for _, n := range []int{100_000, 1} {
			tr := mustCompile(b, sizedTree(b, n))
			events := spreadEvents(b, n)
			var actions []Action
			sides = append(sides, &side{name: fmt.Sprint(n), op: func(i int) {
				actions = tr.Actions(events[i%len(events)], actions[:0])
				if len(actions) != 1 {
					b.Fatalf("%d actions", len(actions))
				}
			}})
		}
		b.ReportAllocs()
		b.ResetTimer()
		interleave(b, sides[0], sides[1])
	})
}

// BenchmarkCounted measures what the engine's counters cost: each
// workload evaluated through Counters.Actions (as the engine does)
// against Tree.Actions, interleaved, CPU time.
//
//	go test ./engine/tree -run '^$' -bench Counted -benchtime 200000x -count 5
func BenchmarkCounted(b *testing.B) {
	run := func(b *testing.B, tr *Tree, next func(i int) *Event, decode []byte, want int) {
		c := tr.NewCounters()
		var actions []Action
		op := func(counted bool) func(int) {
			return func(i int) {
				ev := next(i)
				if decode != nil {
					var err error
					if ev, err = DecodeEvent(decode); err != nil {
						b.Fatal(err)
					}
				}
				if counted {
					actions = c.Actions(ev, actions[:0], 1)
				} else {
					actions = tr.Actions(ev, actions[:0])
				}
				if len(actions) != want {
					b.Fatalf("%d actions, want %d", len(actions), want)
				}
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		interleave(b, &side{name: "counted", op: op(true)}, &side{name: "plain", op: op(false)})
	}
	b.Run("raw", func(b *testing.B) {
		run(b, ruleFileTree(b, fullMatchRule, ""), func(int) *Event { return nil }, readFile(b, fullMatchEvent), 1)
	})
	b.Run("nomatch", func(b *testing.B) {
		ev := eventFile(b, noMatchEvent)
		run(b, ruleFileTree(b, noMatchRule, ""), func(int) *Event { return ev }, nil, 0)
	})
	b.Run("iterator", func(b *testing.B) {
		ev := eventFile(b, "tornado/openshift_webhook_event.json")
		run(b, mustCompile(b, tornadoDir(b, "v2/test_config_iterator")), func(int) *Event { return ev }, nil, 15)
	})
	b.Run("large", func(b *testing.B) {
		events := spreadEvents(b, 1000)
		run(b, mustCompile(b, scaleTree(b, 10_000)), func(i int) *Event { return events[i%len(events)] }, nil, 10)
	})
}
