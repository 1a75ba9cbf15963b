package config

import (
	"reflect"
	"slices"
)

// maxDiffPaths bounds how many paths DiffOutside reports.
const maxDiffPaths = 20

// DiffOutside compares two trees and returns the paths (dot-joined names
// from the root) where they differ outside the subtree below scope, an
// absolute node path starting at the root. The node at scope itself is
// compared by the fields that isolate what lies below it (see
// SameIsolation), and so is everything that is neither below it nor on the way to it; its
// children and rules are not. A node present in one tree only is reported
// by its path; a node whose own fields differ is reported without its
// descendants (unless it is on the way to scope), a ruleset whose rules
// differ by its own path. At most 20 paths are returned, in tree order. An empty scope
// or one of the root alone means the whole tree is in scope: nil.
func DiffOutside(a, b *Node, scope []string) []string {
	if len(scope) <= 1 {
		return nil
	}
	d := &differ{scope: scope}
	d.node(nil, a, b)
	return d.paths
}

type differ struct {
	scope []string
	paths []string
}

func (d *differ) add(path []string) bool {
	if len(d.paths) >= maxDiffPaths {
		return false
	}
	d.paths = append(d.paths, PathString(path))
	return true
}

// onScopePath reports whether path is a prefix of the scope (the scope
// node or one of its ancestors): the children of a differing node on that
// path are still compared, to find the changes in scope.
func (d *differ) onScopePath(path []string) bool {
	return len(path) <= len(d.scope) && slices.Equal(path, d.scope[:len(path)])
}

// node compares a and b, found at the same path below parent.
func (d *differ) node(parent []string, a, b *Node) {
	if a == b || len(d.paths) >= maxDiffPaths {
		return
	}
	path := pairPath(parent, a, b)
	if a == nil || b == nil {
		d.add(path)
		return
	}
	if slices.Equal(path, d.scope) {
		// The scope node: what lies below it, and its description, are
		// in scope.
		if !SameIsolation(a, b) {
			d.add(path)
		}
		return
	}
	if !ownFieldsEqual(a, b) {
		if !d.add(path) {
			return
		}
		if !d.onScopePath(path) {
			return
		}
	}
	if !slices.EqualFunc(a.Rules, b.Rules, ruleEqual) {
		d.add(path)
	}
	childPairs(a, b, func(ca, cb *Node) { d.node(path, ca, cb) })
}

// pairPath is the path of the node found at the same place below parent
// in two trees, a or b nil in the tree that lacks it.
func pairPath(parent []string, a, b *Node) []string {
	var name string
	if a != nil {
		name = a.Name
	} else {
		name = b.Name
	}
	return append(parent[:len(parent):len(parent)], name)
}

// childPairs calls f with each child of a and b's child of the same name
// (nil when b has none), then with each child only b has (a's side nil).
func childPairs(a, b *Node, f func(ca, cb *Node)) {
	for _, ca := range a.Children {
		f(ca, b.Child(ca.Name))
	}
	for _, cb := range b.Children {
		if a.Child(cb.Name) == nil {
			f(nil, cb)
		}
	}
}

// NodeEqual reports whether two subtrees are the same: same fields, same
// children in the same order, same rules in the same order. Numbers are
// compared as written (1000 and 1000.0 differ).
func NodeEqual(a, b *Node) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || !ownFieldsEqual(a, b) {
		return false
	}
	return slices.EqualFunc(a.Children, b.Children, NodeEqual) && slices.EqualFunc(a.Rules, b.Rules, ruleEqual)
}

// SameIsolation reports whether two nodes agree on the fields that decide
// which events reach their subtrees: kind, name, active flag, filter and
// target (the description aside). A token scoped at a node may not change
// them (docs/decisions.md decision 19).
func SameIsolation(a, b *Node) bool {
	return a.Kind == b.Kind && a.Name == b.Name && a.Active == b.Active &&
		a.Target == b.Target && reflect.DeepEqual(a.Filter, b.Filter)
}

// ownFieldsEqual compares the fields of two nodes but not their children
// and rules.
func ownFieldsEqual(a, b *Node) bool {
	return a.Kind == b.Kind && a.Name == b.Name && a.Description == b.Description &&
		a.Active == b.Active && a.Target == b.Target && reflect.DeepEqual(a.Filter, b.Filter)
}

func ruleEqual(a, b *Rule) bool {
	return a == b || reflect.DeepEqual(a, b)
}

// Change is one difference between two trees, found node by node (Diff).
type Change struct {
	// Path is the node's path, dot-joined names from the root.
	Path string `json:"path"`
	// Op is "added" or "removed" (the node and its subtree), or
	// "changed": its own fields (Fields: kind, description, active,
	// filter, target), its rules, or the order of its children.
	Op     string   `json:"op"`
	Fields []string `json:"fields,omitempty"`
	// RulesAdded, RulesRemoved and RulesChanged name the rules of a
	// ruleset that changed; RulesReordered is set when the rules both
	// trees hold are in another order.
	RulesAdded     []string `json:"rules_added,omitempty"`
	RulesRemoved   []string `json:"rules_removed,omitempty"`
	RulesChanged   []string `json:"rules_changed,omitempty"`
	RulesReordered bool     `json:"rules_reordered,omitempty"`
	// ChildrenReordered is set when the children both trees hold are in
	// another order.
	ChildrenReordered bool `json:"children_reordered,omitempty"`
}

// The operations of a Change.
const (
	ChangeAdded   = "added"
	ChangeRemoved = "removed"
	ChangeChanged = "changed"
)

// Diff returns the differences from tree a to tree b, node by node in
// tree order (a's children first, then those only b has): nil when they
// are the same (NodeEqual). Subtrees shared by both trees (the same
// pointer) are not visited.
func Diff(a, b *Node) []Change {
	var out []Change
	var walk func(parent []string, a, b *Node)
	walk = func(parent []string, a, b *Node) {
		if a == b {
			return
		}
		path := pairPath(parent, a, b)
		switch {
		case b == nil:
			out = append(out, Change{Path: PathString(path), Op: ChangeRemoved})
			return
		case a == nil:
			out = append(out, Change{Path: PathString(path), Op: ChangeAdded})
			return
		}
		c := Change{Path: PathString(path), Op: ChangeChanged, Fields: changedFields(a, b)}
		diffRules(&c, a.Rules, b.Rules)
		c.ChildrenReordered = !sameOrder(names(a.Children, func(n *Node) string { return n.Name }), names(b.Children, func(n *Node) string { return n.Name }))
		if len(c.Fields) > 0 || len(c.RulesAdded)+len(c.RulesRemoved)+len(c.RulesChanged) > 0 || c.RulesReordered || c.ChildrenReordered {
			out = append(out, c)
		}
		childPairs(a, b, func(ca, cb *Node) { walk(path, ca, cb) })
	}
	walk(nil, a, b)
	return out
}

// changedFields names the own fields of two nodes that differ.
func changedFields(a, b *Node) []string {
	var f []string
	if a.Kind != b.Kind {
		f = append(f, "kind")
	}
	if a.Description != b.Description {
		f = append(f, "description")
	}
	if a.Active != b.Active {
		f = append(f, "active")
	}
	if !reflect.DeepEqual(a.Filter, b.Filter) {
		f = append(f, "filter")
	}
	if a.Target != b.Target {
		f = append(f, "target")
	}
	return f
}

// diffRules records in c how rules a became rules b.
func diffRules(c *Change, a, b []*Rule) {
	ruleName := func(r *Rule) string { return r.Name }
	for _, ra := range a {
		i := slices.IndexFunc(b, func(r *Rule) bool { return r.Name == ra.Name })
		switch {
		case i < 0:
			c.RulesRemoved = append(c.RulesRemoved, ra.Name)
		case !ruleEqual(ra, b[i]):
			c.RulesChanged = append(c.RulesChanged, ra.Name)
		}
	}
	for _, rb := range b {
		if !slices.ContainsFunc(a, func(r *Rule) bool { return r.Name == rb.Name }) {
			c.RulesAdded = append(c.RulesAdded, rb.Name)
		}
	}
	c.RulesReordered = !sameOrder(names(a, ruleName), names(b, ruleName))
}

func names[T any](xs []T, name func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = name(x)
	}
	return out
}

// sameOrder reports whether the names a and b share are in the same order
// in both.
func sameOrder(a, b []string) bool {
	common := func(xs, other []string) []string {
		var out []string
		for _, x := range xs {
			if slices.Contains(other, x) {
				out = append(out, x)
			}
		}
		return out
	}
	return slices.Equal(common(a, b), common(b, a))
}
