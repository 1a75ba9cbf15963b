package backtest

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/engine/tree"
)

// table numbers the paths of the rules (or rulesets) of both trees: one
// index per path, in the order the trees list them (the active tree's,
// then the candidate's own), and which tree has each.
type table struct {
	index map[string]int
	paths []string
	in    [][2]bool
}

func newTable() *table { return &table{index: map[string]int{}} }

// add returns the index of path, recording that side's tree has it.
func (t *table) add(path string, side int) int {
	i, ok := t.index[path]
	if !ok {
		i = len(t.paths)
		t.index[path] = i
		t.paths = append(t.paths, path)
		t.in = append(t.in, [2]bool{})
	}
	t.in[i][side] = true
	return i
}

// shape mirrors a node of one tree with the table indexes of its rules
// and ruleset, to read a processed result without building paths.
type shape struct {
	name     string
	children []*shape
	// ruleset is the ruleset's index, rules the index of each rule.
	ruleset int
	rules   []int
	// ruleNames are the rules' names, for the labels of iterated rules.
	ruleNames []string
}

func newShape(n *config.Node, parent []string, rules, rulesets *table, side int) *shape {
	path := append(parent[:len(parent):len(parent)], n.Name)
	s := &shape{name: n.Name}
	if n.Kind == config.KindRuleset {
		p := strings.Join(path, "/")
		s.ruleset = rulesets.add(p, side)
		for _, r := range n.Rules {
			s.rules = append(s.rules, rules.add(p+"/"+r.Name, side))
			s.ruleNames = append(s.ruleNames, r.Name)
		}
		return s
	}
	for _, c := range n.Children {
		s.children = append(s.children, newShape(c, path, rules, rulesets, side))
	}
	return s
}

// child returns the shape of the i-th processed child named name.
func (s *shape) child(i int, name string) *shape {
	if i < len(s.children) && s.children[i].name == name {
		return s.children[i]
	}
	for _, c := range s.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

// side is one of the two trees.
type side struct {
	tree *tree.Tree
	top  *shape
}

// match is a rule that matched in one evaluation: its index and, below an
// iterator, the path of its ruleset with the iterations ("root/hosts[3]/alerts").
type match struct {
	rule int
	iter string
}

// outcome is what one tree did with one event.
type outcome struct {
	matches []match
	actions []tree.Action
}

// counter counts the outcomes of both trees.
type counter struct {
	b *Backtest
	// stamp is the number of the event being counted, from 1: a rule or
	// ruleset whose seen value equals it was already counted for it.
	stamp          int64
	ruleCount      [][2]int64
	ruleSeen       [][2]int64
	reachedCount   [][2]int64
	reachedSeen    [][2]int64
	rsMatchedCount [][2]int64
	rsMatchedSeen  [][2]int64
	events         int64
	undecodable    int64
	differing      int64
	samples        []Sample
	// segs is the path being walked, with iterations.
	segs []string
	out  [2]outcome
}

func newCounter(b *Backtest) *counter {
	nr, ns := len(b.rules.paths), len(b.rulesets.paths)
	return &counter{b: b,
		ruleCount: make([][2]int64, nr), ruleSeen: make([][2]int64, nr),
		reachedCount: make([][2]int64, ns), reachedSeen: make([][2]int64, ns),
		rsMatchedCount: make([][2]int64, ns), rsMatchedSeen: make([][2]int64, ns),
	}
}

// event evaluates one record with both trees and counts.
func (c *counter) event(m *kafkasource.Message) {
	if c.count(m.Value()) && len(c.samples) < c.b.spec.Sample {
		c.samples = append(c.samples, c.sample(m))
	}
}

// count evaluates one record's value with both trees, counts, and reports
// whether the outcomes differ.
func (c *counter) count(value []byte) (differs bool) {
	c.events++
	ev, err := tree.DecodeEvent(value)
	if err != nil {
		c.undecodable++
		return false
	}
	c.stamp++
	for i, s := range c.b.sides {
		res, actions := s.tree.Process(ev)
		o := &c.out[i]
		o.matches, o.actions = o.matches[:0], actions
		c.segs = c.segs[:0]
		c.walk(i, res, s.top, false)
	}
	if c.out[0].equal(&c.out[1]) {
		return false
	}
	c.differing++
	return true
}

// walk counts the rules and rulesets of a processed node.
func (c *counter) walk(side int, n *tree.ProcessedNode, s *shape, iterated bool) {
	if s == nil {
		return
	}
	switch n.Kind {
	case config.KindFilter:
		if n.Status != tree.StatusMatched {
			return
		}
		c.segs = append(c.segs, n.Name)
		for i, child := range n.Nodes {
			c.walk(side, child, s.child(i, child.Name), iterated)
		}
		c.segs = c.segs[:len(c.segs)-1]
	case config.KindIterator:
		for _, it := range n.Events {
			c.segs = append(c.segs, n.Name+"["+it.Event.IterationLabel()+"]")
			for i, child := range it.Nodes {
				c.walk(side, child, s.child(i, child.Name), true)
			}
			c.segs = c.segs[:len(c.segs)-1]
		}
	case config.KindRuleset:
		if n.Rules == nil {
			return
		}
		c.once(c.reachedSeen, c.reachedCount, s.ruleset, side)
		var iter string
		for i, pr := range n.Rules.Rules {
			if pr.Status != tree.RuleMatched || i >= len(s.rules) {
				continue
			}
			c.once(c.ruleSeen, c.ruleCount, s.rules[i], side)
			c.once(c.rsMatchedSeen, c.rsMatchedCount, s.ruleset, side)
			if iterated && iter == "" {
				iter = strings.Join(append(c.segs, n.Name), "/")
			}
			c.out[side].matches = append(c.out[side].matches, match{rule: s.rules[i], iter: iter})
		}
	}
}

// once counts index for the current event unless it was already.
func (c *counter) once(seen, count [][2]int64, index, side int) {
	if seen[index][side] != c.stamp {
		seen[index][side] = c.stamp
		count[index][side]++
	}
}

// equal reports whether two outcomes match the same rules in the same
// iterations and resolve the same actions.
func (o *outcome) equal(p *outcome) bool {
	if !slices.Equal(o.matches, p.matches) || len(o.actions) != len(p.actions) {
		return false
	}
	for i := range o.actions {
		a, b := &o.actions[i], &p.actions[i]
		if a.ID != b.ID || a.Position != b.Position || !reflect.DeepEqual(a.Payload, b.Payload) {
			return false
		}
	}
	return true
}

// sample records the current event with both outcomes.
func (c *counter) sample(m *kafkasource.Message) Sample {
	s := Sample{Partition: m.Partition(), Offset: m.Offset(), Time: m.Time(), EventBytes: len(m.Value())}
	if id, ok := m.Header("squall-event-id"); ok {
		s.EventID = string(id)
	}
	if len(m.Value()) <= MaxSampleEventBytes {
		s.Event = json.RawMessage(m.Value())
	}
	for i, o := range c.out {
		oc := Outcome{Matched: make([]string, 0, len(o.matches)), Actions: make([]ResolvedAction, 0, len(o.actions))}
		for _, mt := range o.matches {
			oc.Matched = append(oc.Matched, c.label(mt))
		}
		for _, a := range o.actions {
			oc.Actions = append(oc.Actions, ResolvedAction{ID: a.ID, Position: a.Position, Payload: a.Payload})
		}
		if i == 0 {
			s.Active = oc
		} else {
			s.Candidate = oc
		}
	}
	return s
}

// label writes a match's rule path, with its iterations.
func (c *counter) label(mt match) string {
	path := c.b.rules.paths[mt.rule]
	if mt.iter == "" {
		return path
	}
	return mt.iter + path[strings.LastIndexByte(path, '/'):]
}

// fill writes the counts into res.
func (c *counter) fill(res *Result) {
	res.Events, res.Undecodable, res.DifferingEvents = c.events, c.undecodable, c.differing
	res.Samples = c.samples
	if res.Samples == nil {
		res.Samples = []Sample{}
	}
	res.Rules = make([]RuleCount, 0, len(c.ruleCount))
	res.DifferingRules = []string{}
	for i, path := range c.b.rules.paths {
		rc := RuleCount{Rule: path, Active: c.ruleCount[i][0], Candidate: c.ruleCount[i][1], Only: only(c.b.rules.in[i])}
		res.Rules = append(res.Rules, rc)
		if rc.Active != rc.Candidate {
			res.DifferingRules = append(res.DifferingRules, path)
		}
	}
	res.Rulesets = make([]RulesetCount, 0, len(c.reachedCount))
	for i, path := range c.b.rulesets.paths {
		res.Rulesets = append(res.Rulesets, RulesetCount{Ruleset: path, Only: only(c.b.rulesets.in[i]),
			Active:    RulesetOutcome{Reached: c.reachedCount[i][0], Matched: c.rsMatchedCount[i][0]},
			Candidate: RulesetOutcome{Reached: c.reachedCount[i][1], Matched: c.rsMatchedCount[i][1]},
		})
	}
}

// only names the tree that alone has a path ("" when both have it).
func only(in [2]bool) string {
	switch {
	case in[0] && !in[1]:
		return sideNames[0]
	case in[1] && !in[0]:
		return sideNames[1]
	}
	return ""
}
