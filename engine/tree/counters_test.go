package tree

import (
	"fmt"
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
)

// countsOf tallies, from the result trees of test evaluations (Process,
// which records every node and rule), what the counters of live
// evaluations must give.
type countsOf struct {
	root  *config.Node
	nodes map[string][2]uint64 // reached, matched
	rules map[string][3]uint64 // reached, matched, actions
}

func newCountsOf(root *config.Node) *countsOf {
	return &countsOf{root: root, nodes: map[string][2]uint64{}, rules: map[string][3]uint64{}}
}

func (c *countsOf) add(parent []string, p *ProcessedNode) {
	path := append(parent[:len(parent):len(parent)], p.Name)
	key := strings.Join(path, "/")
	n := c.nodes[key]
	n[0]++
	switch p.Kind {
	case config.KindFilter:
		if p.Status == StatusMatched {
			n[1]++
		}
		for _, ch := range p.Nodes {
			c.add(path, ch)
		}
	case config.KindIterator:
		cn := c.root
		for _, name := range path[1:] {
			cn = cn.Child(name)
		}
		if p.Status == StatusMatched && cn.Active {
			n[1]++
		}
		for _, it := range p.Events {
			for _, ch := range it.Nodes {
				c.add(path, ch)
			}
		}
	case config.KindRuleset:
		matched := false
		for _, pr := range p.Rules.Rules {
			r := c.rules[key+"/"+pr.Name]
			if pr.Status != RuleNotProcessed {
				r[0]++
			}
			if pr.Status == RuleMatched {
				r[1]++
				r[2] += uint64(len(pr.Actions))
				matched = true
			}
			c.rules[key+"/"+pr.Name] = r
		}
		if matched {
			n[1]++
		}
	}
	c.nodes[key] = n
}

// check compares the stats with the tally.
func (c *countsOf) check(t *testing.T, name string, events uint64, st Stats) {
	t.Helper()
	if st.Events != events {
		t.Fatalf("%s: %d events counted, want %d", name, st.Events, events)
	}
	for _, ns := range st.Nodes {
		key := strings.Join(ns.Path, "/")
		want := c.nodes[key]
		if ns.Reached != want[0] || ns.Matched != want[1] {
			b, _ := config.EncodeExport(c.root)
			t.Fatalf("%s: node %s reached %d matched %d, want %d %d\ntree: %s", name, key, ns.Reached, ns.Matched, want[0], want[1], b)
		}
		for _, rs := range ns.Rules {
			want := c.rules[key+"/"+rs.Name]
			if rs.Reached != want[0] || rs.Matched != want[1] || rs.Actions != want[2] {
				b, _ := config.EncodeExport(c.root)
				t.Fatalf("%s: rule %s/%s reached %d matched %d actions %d, want %v\ntree: %s", name, key, rs.Name, rs.Reached, rs.Matched, rs.Actions, want, b)
			}
			if (rs.Matched > 0) != (rs.LastMatchMs > 0) {
				t.Fatalf("%s: rule %s/%s matched %d times, last match %d", name, key, rs.Name, rs.Matched, rs.LastMatchMs)
			}
		}
	}
}

// TestCounters_agreeWithProcess checks, on generated trees and events,
// that the counters of live evaluations (through the index and the
// guards, which skip nodes) and what Stats derives from them equal what
// the recorded result trees show, with the events spread over two shards.
func TestCounters_agreeWithProcess(t *testing.T) {
	t.Parallel()
	for seed := range uint64(400) {
		g := newTreeGen(seed)
		c := generatedCase(t, g, fmt.Sprintf("seed %d", seed))
		shards := []*Counters{c.tr.NewCounters(), c.tr.NewCounters()}
		want := newCountsOf(c.root)
		var actions []Action
		const events = 20
		for i := range events {
			ev, err := DecodeEvent(g.event())
			if err != nil {
				t.Fatal(err)
			}
			res, _ := c.tr.Process(ev)
			want.add(nil, res)
			sh := shards[i%2]
			actions = sh.Actions(ev, actions[:0], int64(1000+i))
			for k := range actions {
				sh.ActionDone(&actions[k], k%2 == 0)
			}
		}
		st := c.tr.Stats(shards...)
		want.check(t, c.name, events, st)
		var produced, done uint64
		for _, ns := range st.Nodes {
			for _, rs := range ns.Rules {
				produced += rs.Actions
				done += rs.Succeeded + rs.Failed
			}
		}
		if done != produced {
			t.Fatalf("%s: %d action outcomes counted, %d actions produced", c.name, done, produced)
		}
	}
}

func TestCounters_lastMatchAndOtherTrees(t *testing.T) {
	tr := mustCompile(t, rulesetTree(mustRule(t, `{"name":"r","active":true,"continue":true,"constraint":{"WHERE":null,"WITH":{}},
		"actions":[{"id":"a","payload":{}},{"id":"b","payload":{}}]}`)))
	other := mustCompile(t, rulesetTree(mustRule(t, `{"name":"r","active":true,"continue":true,"constraint":{"WHERE":null,"WITH":{}},"actions":[]}`)))
	c := tr.NewCounters()
	ev := payloadEvent(t, `{}`)
	acts := c.Actions(ev, nil, 5000)
	acts = c.Actions(ev, acts, 4000) // an earlier clock does not move the last match back
	if len(acts) != 4 {
		t.Fatalf("%d actions", len(acts))
	}
	c.ActionDone(&acts[0], true)
	c.ActionDone(&acts[1], false)
	c.ActionDone(&Action{ID: "made elsewhere"}, true)
	st := tr.Stats(c, other.NewCounters(), nil)
	rs := st.Nodes[1].Rules[0]
	if st.Events != 2 || rs.Reached != 2 || rs.Matched != 2 || rs.Actions != 4 || rs.Succeeded != 1 || rs.Failed != 1 || rs.LastMatchMs != 5000 {
		t.Fatalf("stats %+v, rule %+v", st, rs)
	}
	if got := tr.Stats(); got.Events != 0 || got.Nodes[0].Reached != 0 {
		t.Fatalf("no counters: %+v", got)
	}
}
