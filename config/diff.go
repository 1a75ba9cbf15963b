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
	var name string
	if a != nil {
		name = a.Name
	} else {
		name = b.Name
	}
	path := append(parent[:len(parent):len(parent)], name)
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
	for _, ca := range a.Children {
		d.node(path, ca, b.Child(ca.Name))
	}
	for _, cb := range b.Children {
		if a.Child(cb.Name) == nil {
			d.node(path, nil, cb)
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
