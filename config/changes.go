package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// ChangeOp is what a [Change] does.
type ChangeOp string

// The operations of a change.
const (
	Added   ChangeOp = "+"
	Removed ChangeOp = "-"
	Changed ChangeOp = "~"
)

// Change is one difference between two trees: a node or a rule added,
// removed or changed.
type Change struct {
	Op ChangeOp
	// Path is the node's path from the top node (the ruleset's, for a
	// rule).
	Path []string
	// Kind is the node's kind (the new one, or the old one when removed).
	Kind Kind
	// Rule is the rule's name when the change is a rule's, else "".
	Rule string
	// Fields are, for a changed node or rule, the fields that differ, as
	// the export file names them ("filter", "active", "WHERE", "actions",
	// "rules order"...); for an added or removed node, what it holds
	// ("2 rules", "3 nodes, 5 rules").
	Fields []string
}

// String writes the change on one line, the path "/"-joined as rule
// paths are: "+ root/alerts (Filter, 2 nodes, 3 rules)",
// "~ root/alerts/disk/notify: WHERE, actions", "- root/old (Ruleset)".
func (c Change) String() string {
	path := strings.Join(c.Path, "/")
	what := c.Kind.String()
	if c.Rule != "" {
		path += "/" + c.Rule
		what = "rule"
	}
	if c.Op == Changed {
		return fmt.Sprintf("%s %s (%s): %s", c.Op, path, what, strings.Join(c.Fields, ", "))
	}
	if len(c.Fields) > 0 {
		what += ", " + strings.Join(c.Fields, ", ")
	}
	return fmt.Sprintf("%s %s (%s)", c.Op, path, what)
}

// Changes lists the differences from tree a to tree b, node by node and
// rule by rule, in the order of b (removals where the removed node or rule
// stood). Either tree may be nil (an empty tree). A node whose kind
// changed is one change; what lies below it is not compared.
func Changes(a, b *Node) []Change {
	var out []Change
	changes(&out, nil, a, b)
	return out
}

func changes(out *[]Change, parent []string, a, b *Node) {
	switch {
	case a == nil && b == nil:
		return
	case a == nil:
		*out = append(*out, Change{Op: Added, Path: childPath(parent, b.Name), Kind: b.Kind, Fields: contents(b)})
		return
	case b == nil:
		*out = append(*out, Change{Op: Removed, Path: childPath(parent, a.Name), Kind: a.Kind, Fields: contents(a)})
		return
	}
	path := childPath(parent, b.Name)
	if a.Kind != b.Kind {
		*out = append(*out, Change{Op: Changed, Path: path, Kind: b.Kind, Fields: []string{"kind (was " + a.Kind.String() + ")"}})
		return
	}
	var fields []string
	if a.Description != b.Description {
		fields = append(fields, "description")
	}
	if a.Active != b.Active {
		fields = append(fields, "active")
	}
	if !reflect.DeepEqual(a.Filter, b.Filter) {
		fields = append(fields, "filter")
	}
	if a.Target != b.Target {
		fields = append(fields, "target")
	}
	if !sameOrder(names(a.Children, nodeName), names(b.Children, nodeName)) {
		fields = append(fields, "nodes order")
	}
	if !sameOrder(names(a.Rules, ruleName), names(b.Rules, ruleName)) {
		fields = append(fields, "rules order")
	}
	if len(fields) > 0 {
		*out = append(*out, Change{Op: Changed, Path: path, Kind: b.Kind, Fields: fields})
	}
	ruleChanges(out, path, a, b)
	for _, cb := range b.Children {
		changes(out, path, a.Child(cb.Name), cb)
	}
	for _, ca := range a.Children {
		if b.Child(ca.Name) == nil {
			changes(out, path, ca, nil)
		}
	}
}

func ruleChanges(out *[]Change, path []string, a, b *Node) {
	for _, rb := range b.Rules {
		ra, _ := a.Rule(rb.Name)
		if ra == nil {
			*out = append(*out, Change{Op: Added, Path: path, Kind: b.Kind, Rule: rb.Name})
			continue
		}
		var fields []string
		if ra.Description != rb.Description {
			fields = append(fields, "description")
		}
		if ra.Continue != rb.Continue {
			fields = append(fields, "continue")
		}
		if ra.Active != rb.Active {
			fields = append(fields, "active")
		}
		if !reflect.DeepEqual(ra.Where, rb.Where) {
			fields = append(fields, "WHERE")
		}
		if !reflect.DeepEqual(ra.With, rb.With) {
			fields = append(fields, "WITH")
		}
		if !reflect.DeepEqual(ra.Actions, rb.Actions) {
			fields = append(fields, "actions")
		}
		if len(fields) > 0 {
			*out = append(*out, Change{Op: Changed, Path: path, Kind: b.Kind, Rule: rb.Name, Fields: fields})
		}
	}
	for _, ra := range a.Rules {
		if rb, _ := b.Rule(ra.Name); rb == nil {
			*out = append(*out, Change{Op: Removed, Path: path, Kind: a.Kind, Rule: ra.Name})
		}
	}
}

func childPath(parent []string, name string) []string {
	return append(parent[:len(parent):len(parent)], name)
}

// contents says what an added or removed node holds: "2 nodes, 3 rules".
func contents(n *Node) []string {
	nodes, rules := -1, 0
	n.Walk(func(_ []string, x *Node) bool {
		nodes++
		rules += len(x.Rules)
		return true
	})
	var out []string
	if nodes > 0 {
		out = append(out, plural(nodes, "node"))
	}
	if rules > 0 {
		out = append(out, plural(rules, "rule"))
	}
	return out
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func nodeName(n *Node) string { return n.Name }
func ruleName(r *Rule) string { return r.Name }

func names[T any](s []T, name func(T) string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = name(x)
	}
	return out
}

// sameOrder reports whether the names a and b share come in the same
// order in both.
func sameOrder(a, b []string) bool {
	common := func(x, other []string) []string {
		return slices.DeleteFunc(slices.Clone(x), func(s string) bool { return !slices.Contains(other, s) })
	}
	return slices.Equal(common(a, b), common(b, a))
}
