package backtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
)

const testTopic = "squall.events"

// treeJSON is the tree of the tests. Orders over THRESHOLD are logged
// (over_100); the rule REGION_RULE matches orders of region REGION; every
// flagged item of an event matches per_item/flagged; alerts are logged
// with the note NOTE.
const treeJSON = `{"version": "1.1", "Filter": {
  "name": "root", "filter": {"description": "", "active": true, "filter": {}},
  "nodes": [
    {"Filter": {"name": "orders", "filter": {"description": "", "active": true,
       "filter": {"type": "equals", "first": "${event.type}", "second": "order"}},
       "nodes": [{"Ruleset": {"name": "big", "rules": [
         {"name": "over_100", "description": "", "continue": true, "active": true,
          "constraint": {"WHERE": {"type": "gt", "first": "${event.payload.amount}", "second": THRESHOLD}, "WITH": {}},
          "actions": [{"id": "logger", "payload": {"amount": "${event.payload.amount}"}}]},
         {"name": "REGION_RULE", "description": "", "continue": true, "active": true,
          "constraint": {"WHERE": {"type": "equals", "first": "${event.payload.region}", "second": "REGION"}, "WITH": {}},
          "actions": []}]}}]}},
    {"Iterator": {"name": "items", "iterator": {"description": "", "active": true, "target": "${event.payload.items}"},
       "nodes": [{"Ruleset": {"name": "per_item", "rules": [
         {"name": "flagged", "description": "", "continue": true, "active": true,
          "constraint": {"WHERE": {"type": "equals", "first": "${event.iterator.item.flag}", "second": true}, "WITH": {}},
          "actions": [{"id": "logger", "payload": {"item": "${event.iterator.item.name}"}}]}]}}]}},
    {"Ruleset": {"name": "all", "rules": [
       {"name": "alerts", "description": "", "continue": true, "active": true,
        "constraint": {"WHERE": {"type": "equals", "first": "${event.type}", "second": "alert"}, "WITH": {}},
        "actions": [{"id": "logger", "payload": {"note": "NOTE"}}]}]}}
  ]}}`

// testTrees returns the active tree (orders over 100, rule eu, note
// "a") and the candidate (over 50, rule us instead of eu, note "b").
func testTrees(t testing.TB) (active, candidate *config.Node) {
	t.Helper()
	build := func(threshold, rule, region, note string) *config.Node {
		s := strings.NewReplacer("THRESHOLD", threshold, "REGION_RULE", rule, "REGION", region, "NOTE", note).Replace(treeJSON)
		ex, err := config.DecodeExport([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return ex.Node
	}
	return build("100", "eu", "eu", "a"), build("50", "us", "us", "b")
}

// testEvent is the i-th event of the known mix, with what each rule of
// the test trees must do with it, computed here from the event's fields.
type testEvent struct {
	typ     string
	amount  int
	region  string
	flagged int // items flagged
	items   int
}

func genEvent(i int) testEvent {
	e := testEvent{typ: "order", amount: (i * 37) % 200, region: []string{"eu", "us", "apac"}[i%3]}
	switch i % 5 {
	case 3:
		e.typ = "alert"
	case 4:
		e.typ = "other"
	}
	if i%4 == 0 {
		e.items = i % 7
		e.flagged = min(e.items, i%3)
	}
	return e
}

func (e testEvent) json() []byte {
	items := make([]map[string]any, e.items)
	for j := range items {
		items[j] = map[string]any{"name": fmt.Sprintf("item%d", j), "flag": j < e.flagged}
	}
	payload := map[string]any{"amount": e.amount, "region": e.region}
	if e.items > 0 {
		payload["items"] = items
	}
	b, _ := json.Marshal(map[string]any{"type": e.typ, "created_ms": 1, "payload": payload})
	return b
}

// counts returns the events each rule matches under each tree, and
// whether the event's outcome differs, from its fields alone.
func (e testEvent) counts() (active, candidate map[string]int, differs bool) {
	active, candidate = map[string]int{}, map[string]int{}
	if e.typ == "order" {
		if e.amount > 100 {
			active["root/orders/big/over_100"] = 1
		}
		if e.amount > 50 {
			candidate["root/orders/big/over_100"] = 1
		}
		if e.region == "eu" {
			active["root/orders/big/eu"] = 1
		}
		if e.region == "us" {
			candidate["root/orders/big/us"] = 1
		}
		differs = e.amount > 50 && e.amount <= 100 || e.region != "apac"
	}
	if e.flagged > 0 {
		active["root/items/per_item/flagged"] = 1
		candidate["root/items/per_item/flagged"] = 1
	}
	if e.typ == "alert" {
		active["root/all/alerts"] = 1
		candidate["root/all/alerts"] = 1
		differs = true // the note differs
	}
	return active, candidate, differs
}

func testDial(addr string) kafkasource.Dial {
	return kafkasource.Dial{Brokers: []string{addr}, Timeout: 5 * time.Second}
}

// produce writes the events from..to-1 of the mix, event i to partition
// i%3, stamped at at(i).
func produce(t testing.TB, addr string, from, to int, at func(int) time.Time) {
	t.Helper()
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: testDial(addr), Topic: testTopic})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	}()
	var recs []kafkasource.Record
	for i := from; i < to; i++ {
		recs = append(recs, kafkasource.Record{Value: genEvent(i).json(), ToPartition: true, Partition: i % 3, Time: at(i),
			Headers: []kafkasource.Header{{Key: "squall-event-id", Value: fmt.Appendf(nil, "ev-%d", i)}}})
	}
	for len(recs) > 0 {
		n := min(len(recs), 500)
		if err := w.Write(t.Context(), recs[:n]...); err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
}

func newReader(t testing.TB, addr string) *kafkasource.Reader {
	t.Helper()
	r, err := kafkasource.NewReader(testDial(addr))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func run(t testing.TB, r Reader, spec Spec) *Result {
	t.Helper()
	b, err := New(r, spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// want computes the expected counts of the events idx.
func want(idx []int) (rules map[string][2]int64, differing int64) {
	rules = map[string][2]int64{}
	for _, i := range idx {
		a, c, d := genEvent(i).counts()
		for k := range a {
			v := rules[k]
			v[0]++
			rules[k] = v
		}
		for k := range c {
			v := rules[k]
			v[1]++
			rules[k] = v
		}
		if d {
			differing++
		}
	}
	return rules, differing
}

// checkCounts compares the result's rule counts and differing events with
// those computed from the events idx.
func checkCounts(t *testing.T, res *Result, idx []int) {
	t.Helper()
	wantRules, wantDiffering := want(idx)
	got := map[string][2]int64{}
	for _, rc := range res.Rules {
		if rc.Active != 0 || rc.Candidate != 0 {
			got[rc.Rule] = [2]int64{rc.Active, rc.Candidate}
		}
	}
	if !maps.Equal(got, wantRules) {
		t.Errorf("rule counts\n got %v\nwant %v", got, wantRules)
	}
	if res.Events != int64(len(idx)) || res.DifferingEvents != wantDiffering {
		t.Errorf("events %d, differing %d; want %d, %d", res.Events, res.DifferingEvents, len(idx), wantDiffering)
	}
	var wantDiff []string
	for _, rc := range res.Rules {
		if w := wantRules[rc.Rule]; w[0] != w[1] {
			wantDiff = append(wantDiff, rc.Rule)
		}
	}
	if !slices.Equal(res.DifferingRules, wantDiff) {
		t.Errorf("differing rules %v, want %v", res.DifferingRules, wantDiff)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestBacktest_Run is the differential check: over a known mix of
// events, the counts per rule and the differing events equal those
// computed from the events sent; the rules and rulesets of one tree only
// say so, and the sample holds both outcomes.
func TestBacktest_Run(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 3})
	const n = 1200
	produce(t, b.Addr, 0, n, func(int) time.Time { return time.Now() })
	active, candidate := testTrees(t)
	res := run(t, newReader(t, b.Addr), Spec{Active: active, Candidate: candidate, Topic: testTopic, Range: Range{Last: n}, Sample: 5})
	checkCounts(t, res, seq(0, n))
	if !res.Complete || res.Truncated || res.RangeEvents != n || res.Undecodable != 0 || len(res.Partitions) != 3 {
		t.Errorf("result %+v", res)
	}
	if !slices.Equal(res.DifferingRules, []string{"root/orders/big/over_100", "root/orders/big/eu", "root/orders/big/us"}) {
		t.Errorf("differing rules %v", res.DifferingRules)
	}
	only := map[string]string{}
	for _, rc := range res.Rules {
		only[rc.Rule] = rc.Only
	}
	if only["root/orders/big/eu"] != "active" || only["root/orders/big/us"] != "candidate" || only["root/all/alerts"] != "" {
		t.Errorf("only %v", only)
	}
	for _, rs := range res.Rulesets {
		if rs.Ruleset == "root/orders/big" {
			// Every order reaches it; it matches orders over the threshold
			// or of the region.
			var orders, am, cm int64
			for i := range n {
				e := genEvent(i)
				if e.typ != "order" {
					continue
				}
				orders++
				if e.amount > 100 || e.region == "eu" {
					am++
				}
				if e.amount > 50 || e.region == "us" {
					cm++
				}
			}
			if rs.Active != (RulesetOutcome{orders, am}) || rs.Candidate != (RulesetOutcome{orders, cm}) {
				t.Errorf("ruleset %+v, want reached %d, matched %d and %d", rs, orders, am, cm)
			}
		}
	}
	if len(res.Samples) != 5 {
		t.Fatalf("%d samples", len(res.Samples))
	}
	for _, s := range res.Samples {
		var ev struct {
			Type    string `json:"type"`
			Payload struct {
				Amount int    `json:"amount"`
				Region string `json:"region"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(s.Event, &ev); err != nil {
			t.Fatalf("sample event %s: %v", s.Event, err)
		}
		if !strings.HasPrefix(s.EventID, "ev-") || s.EventBytes != len(s.Event) {
			t.Errorf("sample %+v", s)
		}
		if ev.Type == "alert" {
			if len(s.Active.Actions) != 1 || s.Active.Actions[0].Payload["note"] != "a" || s.Candidate.Actions[0].Payload["note"] != "b" ||
				s.Active.Actions[0].Position != "root/all/alerts/0" || !slices.Contains(s.Candidate.Matched, "root/all/alerts") {
				t.Errorf("alert sample %+v", s)
			}
		}
		if ev.Type == "order" && ev.Payload.Region == "eu" && !slices.Contains(s.Active.Matched, "root/orders/big/eu") {
			t.Errorf("eu order sample %+v", s)
		}
	}
	// The JSON form decodes back.
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(data, &back); err != nil || back.Events != res.Events || len(back.Rules) != len(res.Rules) {
		t.Errorf("JSON round trip: %v %+v", err, back)
	}
}

// TestBacktest_iterations: a rule below an iterator counts an event once
// whatever the iterations it matched in, and a sample names the
// iterations.
func TestBacktest_iterations(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 1})
	w, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: testDial(b.Addr), Topic: testTopic})
	if err != nil {
		t.Fatal(err)
	}
	ev := `{"type":"x","created_ms":1,"payload":{"items":[{"name":"a","flag":true},{"name":"b","flag":false},{"name":"c","flag":true}]}}`
	if err := w.Write(t.Context(), kafkasource.Record{Value: []byte(ev)}, kafkasource.Record{Value: []byte("not an event")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	active, _ := testTrees(t)
	// The candidate flags items whose flag is false.
	candidate := active.Clone()
	candidate.Find([]string{"items", "per_item"}).Rules[0].Where.Second = false
	res := run(t, newReader(t, b.Addr), Spec{Active: active, Candidate: candidate, Topic: testTopic, Range: Range{Last: 10}})
	if res.Events != 2 || res.Undecodable != 1 || res.DifferingEvents != 1 {
		t.Fatalf("result %+v", res)
	}
	for _, rc := range res.Rules {
		if rc.Rule == "root/items/per_item/flagged" && (rc.Active != 1 || rc.Candidate != 1) {
			t.Errorf("flagged %+v, want 1 and 1", rc)
		}
	}
	s := res.Samples[0]
	if !slices.Equal(s.Active.Matched, []string{"root/items[0]/per_item/flagged", "root/items[2]/per_item/flagged"}) ||
		!slices.Equal(s.Candidate.Matched, []string{"root/items[1]/per_item/flagged"}) {
		t.Errorf("matched %v and %v", s.Active.Matched, s.Candidate.Matched)
	}
	if len(s.Active.Actions) != 2 || s.Active.Actions[1].Position != "root/items[2]/per_item/flagged/0" {
		t.Errorf("actions %+v", s.Active.Actions)
	}
}

// TestBacktest_ranges reads the last N of each partition, a time range,
// and a range cut to the bound.
func TestBacktest_ranges(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 3})
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	const n = 300
	produce(t, b.Addr, 0, n, at)
	r := newReader(t, b.Addr)
	active, candidate := testTrees(t)
	spec := Spec{Active: active, Candidate: candidate, Topic: testTopic}

	t.Run("last", func(t *testing.T) {
		s := spec
		s.Range = Range{Last: 20}
		res := run(t, r, s)
		// Each partition holds events p, p+3, ...: its last 20 are the last 60 sent.
		checkCounts(t, res, seq(n-60, n))
		for _, p := range res.Partitions {
			if p.From != 80 || p.To != 100 {
				t.Errorf("partition %+v", p)
			}
		}
	})
	t.Run("since until", func(t *testing.T) {
		s := spec
		s.Range = Range{Since: at(100), Until: at(190)}
		checkCounts(t, run(t, r, s), seq(100, 190))
	})
	t.Run("since", func(t *testing.T) {
		s := spec
		s.Range = Range{Since: at(250)}
		checkCounts(t, run(t, r, s), seq(250, n))
	})
	t.Run("bound", func(t *testing.T) {
		s := spec
		s.Range = Range{Since: at(0)}
		s.MaxEvents = 90
		res := run(t, r, s)
		if !res.Truncated || res.RangeEvents != n {
			t.Errorf("truncated %v, range events %d", res.Truncated, res.RangeEvents)
		}
		// Each partition keeps its latest 30.
		checkCounts(t, res, seq(n-90, n))
	})
	t.Run("nothing in range", func(t *testing.T) {
		s := spec
		s.Range = Range{Since: at(n + 10)}
		res := run(t, r, s)
		if !res.Complete || res.Events != 0 || res.RangeEvents != 0 {
			t.Errorf("result %+v", res)
		}
	})
}

// TestBacktest_offsetsUntouched: a backtest joins no group and commits
// nothing, so the group's committed offsets are the same after it.
func TestBacktest_offsetsUntouched(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 3})
	produce(t, b.Addr, 0, 90, func(int) time.Time { return time.Now() })
	src, err := kafkasource.Open(kafkasource.SourceConfig{Dial: testDial(b.Addr), Topic: testTopic, Group: "engines",
		HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The group consumes a few events of each partition and commits them.
	next := map[int]int64{}
	for len(next) < 3 {
		m, err := src.Fetch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if m.Offset() < 5 {
			next[m.Partition()] = max(next[m.Partition()], m.Offset()+1)
		}
	}
	var ps []kafkasource.Position
	for p, off := range next {
		ps = append(ps, kafkasource.Position{Partition: p, Next: off})
	}
	if err := src.Commit(t.Context(), ps...); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	before := b.Committed(t, "engines", testTopic)
	if len(before) != 3 {
		t.Fatalf("committed %v", before)
	}
	active, candidate := testTrees(t)
	res := run(t, newReader(t, b.Addr), Spec{Active: active, Candidate: candidate, Topic: testTopic, Range: Range{Last: 100}})
	checkCounts(t, res, seq(0, 90))
	if after := b.Committed(t, "engines", testTopic); !maps.Equal(before, after) {
		t.Errorf("committed offsets %v before the backtest, %v after", before, after)
	}
}

// TestBacktest_cancel: cancelling stops the backtest at the next event
// with the counts so far.
func TestBacktest_cancel(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 3})
	produce(t, b.Addr, 0, 300, func(int) time.Time { return time.Now() })
	active, candidate := testTrees(t)
	// At 100 events/s the range takes 3 s: cancel once 20 are read.
	bt, err := New(newReader(t, b.Addr), Spec{Active: active, Candidate: candidate, Topic: testTopic, Range: Range{Last: 100}, Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type ran struct {
		res *Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := bt.Run(ctx)
		done <- ran{res, err}
	}()
	polltest.Wait(t, "20 events read", 10*time.Second, func() bool { return bt.Progress().Read >= 20 })
	cancel()
	got := <-done
	if !errors.Is(got.err, context.Canceled) {
		t.Fatalf("error %v, want cancelled", got.err)
	}
	if got.res.Complete || got.res.Events < 20 || got.res.Events >= 300 || got.res.Events != bt.Progress().Read {
		t.Errorf("complete %v after %d events (progress %+v)", got.res.Complete, got.res.Events, bt.Progress())
	}
	if p := bt.Progress(); p.Total != 300 || p.Rate <= 0 {
		t.Errorf("progress %+v", p)
	}
	if _, err := bt.Run(t.Context()); !errors.Is(err, ErrRan) {
		t.Errorf("second run: %v", err)
	}
}

// TestBacktest_rate: at R events/s with a burst of R/100, n events take at
// least (n - R/100) / R seconds.
func TestBacktest_rate(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 3})
	const n, rate = 300, 1000.0
	produce(t, b.Addr, 0, n, func(int) time.Time { return time.Now() })
	active, candidate := testTrees(t)
	start := time.Now()
	res := run(t, newReader(t, b.Addr), Spec{Active: active, Candidate: candidate, Topic: testTopic, Range: Range{Last: n}, Rate: rate})
	elapsed := time.Since(start)
	checkCounts(t, res, seq(0, n))
	if least := time.Duration(float64(n-rate/100) / rate * float64(time.Second)); elapsed < least {
		t.Errorf("%d events at %g/s in %s, under %s", n, rate, elapsed, least)
	}
	if res.Rate > rate*1.05 {
		t.Errorf("rate %g, over %g", res.Rate, rate)
	}
}

func TestNew_invalid(t *testing.T) {
	t.Parallel()
	active, candidate := testTrees(t)
	now := time.Now()
	ok := Spec{Active: active, Candidate: candidate, Topic: testTopic, Range: Range{Last: 1}}
	tests := []struct {
		name   string
		change func(*Spec)
		err    string
	}{
		{"no active tree", func(s *Spec) { s.Active = nil }, "active: no tree"},
		{"no topic", func(s *Spec) { s.Topic = "" }, "topic: required"},
		{"no range", func(s *Spec) { s.Range = Range{} }, "range: give last"},
		{"last and since", func(s *Spec) { s.Range.Since = now }, "exclude each other"},
		{"until before since", func(s *Spec) { s.Range = Range{Since: now, Until: now.Add(-time.Hour)} }, "range.until"},
		{"negative last", func(s *Spec) { s.Range.Last = -1 }, "range.last"},
		{"sample too large", func(s *Spec) { s.Sample = MaxSample + 1 }, "sample"},
		{"negative rate", func(s *Spec) { s.Rate = -1 }, "rate"},
		{"candidate does not compile", func(s *Spec) {
			s.Candidate = candidate.Clone()
			s.Candidate.Children[0].Children[0].Rules[0].Where = &config.Operator{Type: config.OpRegex, Regex: "(", Target: "${event.type}"}
		}, "candidate tree"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.change(&s)
			_, err := New(nil, s)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}
