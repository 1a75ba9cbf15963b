package config

import (
	"errors"
	"fmt"
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
