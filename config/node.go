package config

import "strings"

// Kind is the kind of a processing-tree node.
type Kind uint8

// The node kinds.
const (
	KindFilter Kind = iota + 1
	KindIterator
	KindRuleset
)

// String returns the kind's name as the API writes it: Filter, Iterator, Ruleset.
func (k Kind) String() string {
	switch k {
	case KindFilter:
		return "Filter"
	case KindIterator:
		return "Iterator"
	case KindRuleset:
		return "Ruleset"
	}
	return "Unknown"
}

// RootName is the name of the tree's root filter.
const RootName = "root"

// Node is one node of the processing tree. Which fields apply depends on Kind:
//   - Filter: Description, Active, Filter (nil matches every event), Children.
//   - Iterator: Description, Active, Target, Children.
//   - Ruleset: Rules.
type Node struct {
	Kind        Kind
	Name        string
	Description string
	Active      bool
	// Filter is the condition of a Filter node; nil matches all events.
	Filter *Operator
	// Target is the accessor an Iterator iterates over, e.g. ${event.payload.alerts}.
	Target   string
	Children []*Node
	Rules    []*Rule
}

// NewRoot returns the implicit root: an active match-all filter named root.
func NewRoot() *Node {
	return &Node{Kind: KindFilter, Name: RootName, Description: "An implicit filter that allows all events", Active: true}
}

// Clone returns a deep copy of the node and its subtree, deep-equal to n.
func (n *Node) Clone() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Filter = n.Filter.Clone()
	c.Children = cloneSlice(n.Children, (*Node).Clone)
	c.Rules = cloneSlice(n.Rules, (*Rule).Clone)
	return &c
}

// cloneSlice copies s with clone applied to each element, keeping a nil
// slice nil and an empty one empty.
func cloneSlice[T any](s []T, clone func(T) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, e := range s {
		out[i] = clone(e)
	}
	return out
}

// Child returns the direct child with the given name, or nil.
func (n *Node) Child(name string) *Node {
	for _, c := range n.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Find follows path (node names below n, not including n) and returns the
// node it names, or nil.
func (n *Node) Find(path []string) *Node {
	cur := n
	for _, name := range path {
		if cur == nil || cur.Kind == KindRuleset {
			return nil
		}
		cur = cur.Child(name)
	}
	return cur
}

// Rule returns the rule of a ruleset with the given name and its index, or nil and -1.
func (n *Node) Rule(name string) (*Rule, int) {
	for i, r := range n.Rules {
		if r.Name == name {
			return r, i
		}
	}
	return nil, -1
}

// Walk calls fn for n and every descendant, depth first, parents before
// children. path holds the names from n down to the visited node. Returning
// false from fn skips the node's children.
func (n *Node) Walk(fn func(path []string, node *Node) bool) {
	n.walk(nil, fn)
}

func (n *Node) walk(prefix []string, fn func([]string, *Node) bool) {
	path := append(prefix[:len(prefix):len(prefix)], n.Name)
	if !fn(path, n) {
		return
	}
	for _, c := range n.Children {
		c.walk(path, fn)
	}
}

// Counts is the number of filters, iterators and rules of a subtree.
type Counts struct {
	Filters   int `json:"filters_count"`
	Iterators int `json:"iterators_count"`
	Rules     int `json:"rules_count"`
}

// Count counts the filters, iterators and rules (active or not) of the
// subtree rooted at n, n included.
func (n *Node) Count() Counts {
	var c Counts
	n.Walk(func(_ []string, x *Node) bool {
		switch x.Kind {
		case KindFilter:
			c.Filters++
		case KindIterator:
			c.Iterators++
		case KindRuleset:
			c.Rules += len(x.Rules)
		}
		return true
	})
	return c
}

// PathString joins node names with dots, as validation messages write paths.
func PathString(path []string) string {
	return strings.Join(path, ".")
}
