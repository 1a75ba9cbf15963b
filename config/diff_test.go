package config

import (
	"slices"
	"testing"
)

func TestDiffOutside(t *testing.T) {
	t.Parallel()
	tenant := func(name string, filter *Operator, rules ...string) *Node {
		rs := &Node{Kind: KindRuleset, Name: "rules"}
		for _, r := range rules {
			rs.Rules = append(rs.Rules, &Rule{Name: r, Active: true})
		}
		return &Node{Kind: KindFilter, Name: name, Active: true, Filter: filter, Children: []*Node{rs}}
	}
	is := func(v string) *Operator {
		return &Operator{Type: OpEquals, First: "${event.metadata.tenant_id}", Second: v}
	}
	active := NewRoot()
	active.Children = []*Node{tenant("acme", is("acme"), "r1"), tenant("other", is("other"), "o1")}
	acme := []string{"root", "acme"}
	for _, tc := range []struct {
		name  string
		edit  func(root *Node)
		scope []string
		want  []string
	}{
		{"no change", func(*Node) {}, acme, nil},
		{"rule below the scope", func(r *Node) { r.Find([]string{"acme", "rules"}).Rules[0].Active = false }, acme, nil},
		{"node added below the scope", func(r *Node) {
			a := r.Child("acme")
			a.Children = append(a.Children, &Node{Kind: KindRuleset, Name: "more"})
		}, acme, nil},
		{"description of the scope node", func(r *Node) { r.Child("acme").Description = "words" }, acme, nil},
		{"filter of the scope node", func(r *Node) { r.Child("acme").Filter = nil }, acme, []string{"root.acme"}},
		{"active flag of the scope node", func(r *Node) { r.Child("acme").Active = false }, acme, []string{"root.acme"}},
		{"scope node deleted", func(r *Node) { r.Children = r.Children[1:] }, acme, []string{"root.acme"}},
		{"another tenant's rule", func(r *Node) { r.Find([]string{"other", "rules"}).Rules[0].Active = false }, acme, []string{"root.other.rules"}},
		{"another tenant's filter", func(r *Node) { r.Child("other").Filter = nil }, acme, []string{"root.other"}},
		{"a new sibling", func(r *Node) { r.Children = append(r.Children, &Node{Kind: KindRuleset, Name: "spy"}) }, acme, []string{"root.spy"}},
		{"the root's filter", func(r *Node) { r.Filter = is("x") }, acme, []string{"root"}},
		{"scoped at the root", func(r *Node) { r.Filter = is("x") }, []string{"root"}, nil},
		{"several", func(r *Node) {
			r.Child("acme").Filter = nil
			r.Child("other").Description = "x"
		}, acme, []string{"root.acme", "root.other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			draft := active.Clone()
			tc.edit(draft)
			if got := DiffOutside(active, draft, tc.scope); !slices.Equal(got, tc.want) {
				t.Errorf("DiffOutside = %q, want %q", got, tc.want)
			}
			if got := DiffOutside(draft, active, tc.scope); !slices.Equal(got, tc.want) {
				t.Errorf("reversed: DiffOutside = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDiff: the node-by-node differences of two trees, in tree order.
func TestDiff(t *testing.T) {
	t.Parallel()
	build := func() *Node {
		rs := &Node{Kind: KindRuleset, Name: "rules", Active: true, Rules: []*Rule{
			{Name: "r1", Active: true}, {Name: "r2", Active: true}, {Name: "r3", Active: true}}}
		root := NewRoot()
		root.Children = []*Node{
			{Kind: KindFilter, Name: "a", Active: true, Children: []*Node{rs}},
			{Kind: KindFilter, Name: "b", Active: true},
			{Kind: KindFilter, Name: "c", Active: true},
		}
		return root
	}
	a := build()
	if got := Diff(a, build()); got != nil {
		t.Fatalf("equal trees: %+v", got)
	}
	b := build()
	rs := b.Find([]string{"a", "rules"})
	rs.Rules = []*Rule{rs.Rules[1], rs.Rules[0], {Name: "r4"}}
	rs.Rules[0].Active = false
	b.Child("b").Description = "words"
	b.Children = []*Node{b.Children[0], b.Children[1], {Kind: KindFilter, Name: "d"}}
	got := Diff(a, b)
	// The root's children that both trees hold kept their order: the root
	// itself is not reported.
	want := []Change{
		{Path: "root.a.rules", Op: ChangeChanged, RulesAdded: []string{"r4"}, RulesRemoved: []string{"r3"}, RulesChanged: []string{"r2"}, RulesReordered: true},
		{Path: "root.b", Op: ChangeChanged, Fields: []string{"description"}},
		{Path: "root.c", Op: ChangeRemoved},
		{Path: "root.d", Op: ChangeAdded},
	}
	if len(got) != len(want) {
		t.Fatalf("Diff = %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Path != w.Path || g.Op != w.Op || !slices.Equal(g.Fields, w.Fields) || !slices.Equal(g.RulesAdded, w.RulesAdded) ||
			!slices.Equal(g.RulesRemoved, w.RulesRemoved) || !slices.Equal(g.RulesChanged, w.RulesChanged) || g.RulesReordered != w.RulesReordered {
			t.Errorf("change %d = %+v, want %+v", i, g, w)
		}
	}
	b.Children[0], b.Children[1] = b.Children[1], b.Children[0]
	if got := Diff(a, b); got[0].Path != "root" || !got[0].ChildrenReordered {
		t.Fatalf("reordered children: %+v", got[0])
	}
}
