package config

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestEdit_Apply checks that an edit leaves the tree it applies to as it
// was, shares what it does not change, and keeps the size exact.
func TestEdit_Apply(t *testing.T) {
	t.Parallel()
	root := NewRoot()
	rs := &Node{Kind: KindRuleset, Name: "rs", Rules: []*Rule{{Name: "a", Active: true}, {Name: "b"}}}
	other := &Node{Kind: KindFilter, Name: "other", Active: true}
	root.Children = []*Node{{Kind: KindFilter, Name: "t", Active: true, Children: []*Node{rs}}, other}
	before, err := EncodeExport(root)
	if err != nil {
		t.Fatal(err)
	}
	size, err := TreeSize(root)
	if err != nil {
		t.Fatal(err)
	}
	e := &Edit{Op: EditUpdateRule, Path: []string{"root", "t", "rs"}, RuleName: "b", Rule: &Rule{Name: "b", Description: "new"}}
	next, nextSize, err := e.Apply(root, size)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := EncodeExport(root); string(after) != string(before) {
		t.Fatal("Apply modified the tree it was given")
	}
	if next.Children[1] != other || next.Find([]string{"t", "rs"}).Rules[0] != rs.Rules[0] {
		t.Error("an untouched subtree or rule was copied")
	}
	if want, _ := TreeSize(next); nextSize != want {
		t.Errorf("size %d, want %d", nextSize, want)
	}
	if got := next.Find([]string{"t", "rs"}).Rules[1].Description; got != "new" {
		t.Errorf("description %q", got)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxNameLength+1)
	many := func(nodes, rules int) *Node {
		root := NewRoot()
		for i := range nodes - 2 {
			root.Children = append(root.Children, &Node{Kind: KindFilter, Name: fmt.Sprintf("f%d", i), Active: true})
		}
		rs := &Node{Kind: KindRuleset, Name: "rs"}
		for i := range rules {
			rs.Rules = append(rs.Rules, &Rule{Name: fmt.Sprintf("r%d", i)})
		}
		root.Children = append(root.Children, rs)
		return root
	}
	for _, tc := range []struct {
		name  string
		tree  *Node
		limit string
	}{
		{"node name", &Node{Kind: KindFilter, Name: RootName, Children: []*Node{{Kind: KindRuleset, Name: long}}}, LimitNodeNameLength},
		{"rule name", &Node{Kind: KindFilter, Name: RootName, Children: []*Node{{Kind: KindRuleset, Name: "rs", Rules: []*Rule{{Name: long}}}}}, LimitRuleNameLength},
		{"nodes", many(MaxNodes+1, 0), LimitNodes},
		{"rules", many(2, MaxRules+1), LimitRules},
		{"at the limits", many(MaxNodes, MaxRules), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckLimits(tc.tree)
			var le *LimitError
			if tc.limit == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.As(err, &le) || le.Limit != tc.limit || !errors.Is(err, ErrLimit) {
				t.Fatalf("err %v, want limit %s", err, tc.limit)
			}
			if len(err.Error()) > 300 {
				t.Errorf("message of %d bytes", len(err.Error()))
			}
			// Validate accepts what it always accepted: the limits are
			// checked on changes, not when old log entries are applied.
			if err := Validate(tc.tree); err != nil {
				t.Errorf("Validate: %v", err)
			}
			// An edit that adds such a tree is refused with the limit.
			e := &Edit{Op: EditReplaceNode, Path: []string{RootName}, Node: tc.tree}
			if _, _, err := e.Apply(NewRoot(), 0); !errors.As(err, &le) || le.Limit != tc.limit {
				t.Errorf("edit: %v", err)
			}
		})
	}
}

// TestEdit_RandomSequence applies a long random sequence of edits and
// checks after each one that the tree stays valid, that the tracked size
// is the encoded size, and that the trees of earlier steps are unchanged
// (edits copy what they change).
func TestEdit_RandomSequence(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	root := NewRoot()
	size, err := TreeSize(root)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		tree *Node
		enc  string
	}
	var history []step
	// nodes lists the paths of the tree's nodes, rulesets those of its rulesets.
	paths := func(n *Node) (nodes, rulesets [][]string) {
		n.Walk(func(p []string, x *Node) bool {
			nodes = append(nodes, p)
			if x.Kind == KindRuleset {
				rulesets = append(rulesets, p)
			}
			return true
		})
		return nodes, rulesets
	}
	pick := func(list [][]string) []string { return list[rng.IntN(len(list))] }
	applied := 0
	for i := range 3000 {
		nodes, rulesets := paths(root)
		var e *Edit
		name := fmt.Sprintf("n%d", rng.IntN(40))
		switch k := rng.IntN(8); {
		case k < 2:
			kinds := []Kind{KindFilter, KindRuleset, KindIterator}
			n := &Node{Kind: kinds[rng.IntN(3)], Name: name, Active: true}
			if n.Kind == KindIterator {
				n.Target = "${event.payload.list}"
			}
			e = &Edit{Op: EditAddNode, Path: pick(nodes), Node: n}
		case k == 2 && len(nodes) > 1:
			e = &Edit{Op: EditDeleteNode, Path: pick(nodes[1:])}
		case k == 3 && len(nodes) > 1:
			p := pick(nodes[1:])
			cur := root.Find(p[1:])
			n := &Node{Kind: cur.Kind, Name: name, Description: fmt.Sprint(i), Active: rng.IntN(2) == 0, Target: cur.Target}
			e = &Edit{Op: EditUpdateNode, Path: p, Node: n}
		case k >= 4 && len(rulesets) > 0:
			p := pick(rulesets)
			rs := root.Find(p[1:])
			r := &Rule{Name: fmt.Sprintf("r%d", rng.IntN(30)), Description: strings.Repeat("d", rng.IntN(5)), Active: true}
			switch {
			case k == 4 || len(rs.Rules) == 0:
				e = &Edit{Op: EditAddRule, Path: p, Rule: r}
			case k == 5:
				e = &Edit{Op: EditUpdateRule, Path: p, RuleName: rs.Rules[rng.IntN(len(rs.Rules))].Name, Rule: r}
			case k == 6:
				e = &Edit{Op: EditDeleteRule, Path: p, RuleName: rs.Rules[rng.IntN(len(rs.Rules))].Name}
			default:
				e = &Edit{Op: EditMoveRule, Path: p, RuleName: rs.Rules[rng.IntN(len(rs.Rules))].Name, Position: rng.IntN(len(rs.Rules))}
			}
		default:
			continue
		}
		next, nextSize, err := e.Apply(root, size)
		if err != nil {
			// Refusals (taken names, nested iterators, children of
			// rulesets) are part of the sequence.
			continue
		}
		applied++
		if err := Validate(next); err != nil {
			t.Fatalf("step %d (%s %v): invalid tree: %v", i, e.Op, e.Path, err)
		}
		if want, _ := TreeSize(next); nextSize != want {
			t.Fatalf("step %d (%s %v): tracked size %d, encoded %d", i, e.Op, e.Path, nextSize, want)
		}
		if i%50 == 0 {
			enc, _ := EncodeExport(root)
			history = append(history, step{root, string(enc)})
		}
		root, size = next, nextSize
	}
	for _, h := range history {
		if enc, _ := EncodeExport(h.tree); string(enc) != h.enc {
			t.Fatal("an edit modified an earlier tree")
		}
	}
	if applied < 1000 {
		t.Fatalf("only %d edits applied", applied)
	}
}

func TestEdit_TreeBytes(t *testing.T) {
	t.Parallel()
	root := NewRoot()
	root.Children = []*Node{{Kind: KindRuleset, Name: "rs"}}
	e := &Edit{Op: EditAddRule, Path: []string{"root", "rs"}, Rule: &Rule{Name: "r"}}
	var le *LimitError
	if _, _, err := e.Apply(root, MaxTreeBytes-10); !errors.As(err, &le) || le.Limit != LimitTreeBytes || le.Value <= MaxTreeBytes {
		t.Fatalf("err %v, want the tree_bytes limit", err)
	}
	if _, _, err := e.Apply(root, 1000); err != nil {
		t.Fatal(err)
	}
}
