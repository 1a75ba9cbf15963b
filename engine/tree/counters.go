package tree

import (
	"sync/atomic"

	"github.com/squallhq/squall/config"
)

// layout describes a compiled tree's nodes in preorder (a node's id is its
// position) and its rules (a rule's id is its position among all the
// tree's rules, from 1), so that counters are slices indexed by id.
type layout struct {
	nodes []layoutNode
	rules int
	// stack holds the ids of the nodes being compiled, while compiling.
	stack []int32
}

type layoutNode struct {
	path   []string
	kind   config.Kind
	parent int32 // -1: the root
	rules  []layoutRule
}

type layoutRule struct {
	name         string
	active, cont bool
	actions      int
}

// count gives n its id. The caller pops it off the stack once its
// children are compiled (uncount).
func (cc *compiler) count(n *node, path []string, cn *config.Node) {
	l := &cc.layout
	parent := int32(-1)
	if len(l.stack) > 0 {
		parent = l.stack[len(l.stack)-1]
	}
	n.id = int32(len(l.nodes))
	l.nodes = append(l.nodes, layoutNode{path: path, kind: cn.Kind, parent: parent})
	l.stack = append(l.stack, n.id)
}

func (cc *compiler) uncount() { cc.layout.stack = cc.layout.stack[:len(cc.layout.stack)-1] }

// countRule gives a rule of the ruleset being compiled (the last node
// counted) its id.
func (cc *compiler) countRule(cr *config.Rule) int32 {
	l := &cc.layout
	rs := &l.nodes[len(l.nodes)-1]
	rs.rules = append(rs.rules, layoutRule{name: cr.Name, active: cr.Active, cont: cr.Continue, actions: len(cr.Actions)})
	l.rules++
	return int32(l.rules)
}

// Counters count what the live evaluations of one tree do: the events
// evaluated, the filters passed, the iterations, the rulesets and rules
// matched with the time of their last match, and the outcome of the
// actions the engine ran ([Counters.ActionDone]). Everything else
// ([Tree.Stats]) derives from them at read time, so that an evaluation
// adds one to a counter only when a filter passes, an iterator iterates or
// a rule matches: an event that matches nothing costs one increment.
//
// Counters are meant to be owned by one evaluating goroutine each (a
// shard: no two goroutines write the same cache lines) and summed on read
// by Tree.Stats, from any goroutine; the counts are atomic so that reads
// need no lock.
type Counters struct {
	tree   *Tree
	events atomic.Uint64
	nodes  []nodeCounts // by node id
	rules  []ruleCounts // by rule id - 1
}

type nodeCounts struct {
	// entered counts a filter's passes and an iterator's iterations: the
	// events that reach its children. matched counts an iterator's
	// targets that were arrays or objects, a ruleset's evaluations in
	// which a rule matched.
	entered, matched atomic.Uint64
}

type ruleCounts struct {
	matched, succeeded, failed atomic.Uint64
	// last is the time of the last match, in epoch milliseconds.
	last atomic.Int64
}

// NewCounters returns zero counters of t's evaluations. Those of a nil
// tree count nothing (evaluating with them panics).
func (t *Tree) NewCounters() *Counters {
	if t == nil {
		return &Counters{}
	}
	return &Counters{tree: t, nodes: make([]nodeCounts, len(t.layout.nodes)), rules: make([]ruleCounts, t.layout.rules)}
}

// Tree returns the tree whose evaluations c counts.
func (c *Counters) Tree() *Tree { return c.tree }

// Actions is [Tree.Actions] counted in c; nowMs (epoch milliseconds) is
// the time of the matches.
func (c *Counters) Actions(ev *Event, dst []Action, nowMs int64) []Action {
	return c.tree.actions(ev, dst, c, nowMs)
}

// MatchedActions is [Tree.MatchedActions] counted in c.
func (c *Counters) MatchedActions(ev *Event, dst []Action, rules []string, nowMs int64) ([]Action, []string) {
	return c.tree.matchedActions(ev, dst, rules, c, nowMs)
}

func (c *Counters) matchedRule(r *rule, now int64) {
	rc := &c.rules[r.id-1]
	rc.matched.Add(1)
	// One write a millisecond at most.
	if rc.last.Load() < now {
		rc.last.Store(now)
	}
}

// ActionDone counts the outcome of an action that an evaluation counted
// in c produced: ok when it ran, else failed. Other actions are ignored.
func (c *Counters) ActionDone(a *Action, ok bool) {
	if a.rule <= 0 || int(a.rule) > len(c.rules) {
		return
	}
	rc := &c.rules[a.rule-1]
	if ok {
		rc.succeeded.Add(1)
	} else {
		rc.failed.Add(1)
	}
}

// Stats are what the counters of a tree count, summed.
type Stats struct {
	// Events is the number of events evaluated.
	Events uint64 `json:"events"`
	// Nodes are every node of the tree, in preorder.
	Nodes []NodeStats `json:"nodes"`
}

// NodeStats are the counts of one node.
type NodeStats struct {
	// Path names the node from the root.
	Path []string    `json:"path"`
	Kind config.Kind `json:"-"`
	// Reached counts the evaluations of the node: the events that
	// reached it, once per iteration of each iterator above it.
	Reached uint64 `json:"reached"`
	// Matched counts the evaluations in which a filter passed, an
	// iterator's target was an array or an object, a ruleset had a rule
	// that matched.
	Matched uint64 `json:"matched"`
	// Rules are a ruleset's rules, in order.
	Rules []RuleStats `json:"rules,omitempty"`
}

// RuleStats are the counts of one rule.
type RuleStats struct {
	Name string `json:"name"`
	// Reached counts the evaluations of the rule: those of its ruleset
	// that no earlier rule stopped; 0 for an inactive rule.
	Reached uint64 `json:"reached"`
	// Matched counts the rule's matches (a PartiallyMatched rule, whose
	// actions are not produced, is not one).
	Matched uint64 `json:"matched"`
	// Actions counts the actions its matches produced.
	Actions uint64 `json:"actions"`
	// Succeeded and Failed count the outcomes the engine reported
	// (Counters.ActionDone).
	Succeeded uint64 `json:"succeeded"`
	Failed    uint64 `json:"failed"`
	// LastMatchMs is the time of the last match, in epoch milliseconds
	// (0: none).
	LastMatchMs int64 `json:"last_match_ms"`
}

// Stats sums the counters (of t's evaluations; others are ignored) and
// derives what they do not count: a node's evaluations are those its
// parent let through, a rule's those of its ruleset that no earlier rule
// stopped, a rule's actions its matches times its actions.
func (t *Tree) Stats(cs ...*Counters) Stats {
	l := &t.layout
	entered := make([]uint64, len(l.nodes))
	matched := make([]uint64, len(l.nodes))
	rules := make([]RuleStats, l.rules)
	var events uint64
	for _, c := range cs {
		if c == nil || c.tree != t {
			continue
		}
		events += c.events.Load()
		for i := range c.nodes {
			entered[i] += c.nodes[i].entered.Load()
			matched[i] += c.nodes[i].matched.Load()
		}
		for i := range c.rules {
			rc, rs := &c.rules[i], &rules[i]
			rs.Matched += rc.matched.Load()
			rs.Succeeded += rc.succeeded.Load()
			rs.Failed += rc.failed.Load()
			rs.LastMatchMs = max(rs.LastMatchMs, rc.last.Load())
		}
	}
	out := Stats{Events: events, Nodes: make([]NodeStats, len(l.nodes))}
	next := 0 // the id of the next rule, minus one
	for i := range l.nodes {
		ln, ns := &l.nodes[i], &out.Nodes[i]
		ns.Path, ns.Kind = ln.path, ln.kind
		if ln.parent < 0 {
			ns.Reached = events
		} else {
			ns.Reached = entered[ln.parent]
		}
		switch ln.kind {
		case config.KindFilter:
			ns.Matched = entered[i]
		default:
			ns.Matched = matched[i]
		}
		if len(ln.rules) == 0 {
			continue
		}
		ns.Rules = rules[next : next+len(ln.rules) : next+len(ln.rules)]
		next += len(ln.rules)
		reached := ns.Reached
		for k, lr := range ln.rules {
			rs := &ns.Rules[k]
			rs.Name = lr.name
			rs.Actions = rs.Matched * uint64(lr.actions)
			if !lr.active {
				continue
			}
			rs.Reached = reached
			if !lr.cont {
				reached -= min(reached, rs.Matched)
			}
		}
	}
	return out
}

// ActionRetracted turns an action counted as succeeded into a failed one:
// the engine counts a batched write as it is batched, and retracts it if
// the write fails for good.
func (c *Counters) ActionRetracted(a *Action) {
	if a.rule <= 0 || int(a.rule) > len(c.rules) {
		return
	}
	rc := &c.rules[a.rule-1]
	rc.succeeded.Add(^uint64(0))
	rc.failed.Add(1)
}
