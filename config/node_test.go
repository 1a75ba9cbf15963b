package config

import (
	"reflect"
	"testing"
)

func testTree() *Node {
	return &Node{Kind: KindFilter, Name: "root", Active: true, Children: []*Node{
		{Kind: KindFilter, Name: "master", Children: []*Node{
			{Kind: KindIterator, Name: "alerts", Target: "${event.payload.alerts}", Children: []*Node{
				{Kind: KindRuleset, Name: "per_alert", Rules: []*Rule{{Name: "a"}, {Name: "b"}}},
			}},
			{Kind: KindRuleset, Name: "master", Rules: []*Rule{{Name: "c"}}},
		}},
		{Kind: KindFilter, Name: "other"},
	}}
}

func TestNode_Find(t *testing.T) {
	t.Parallel()
	root := testTree()
	tests := []struct {
		path []string
		want string // "" for nil
		kind Kind
	}{
		{path: nil, want: "root", kind: KindFilter},
		{path: []string{"master"}, want: "master", kind: KindFilter},
		{path: []string{"master", "master"}, want: "master", kind: KindRuleset},
		{path: []string{"master", "alerts", "per_alert"}, want: "per_alert", kind: KindRuleset},
		{path: []string{"master", "alerts", "per_alert", "x"}},
		{path: []string{"missing"}},
		{path: []string{"master", "missing", "x"}},
	}
	for _, tt := range tests {
		got := root.Find(tt.path)
		switch {
		case tt.want == "" && got != nil:
			t.Errorf("Find(%q) = %s, want nil", tt.path, got.Name)
		case tt.want != "" && (got == nil || got.Name != tt.want || got.Kind != tt.kind):
			t.Errorf("Find(%q) = %+v, want %s %s", tt.path, got, tt.kind, tt.want)
		}
	}
}

func TestNode_Walk(t *testing.T) {
	t.Parallel()
	var got []string
	testTree().Walk(func(path []string, n *Node) bool {
		got = append(got, PathString(path))
		return n.Kind != KindIterator // skip below iterators
	})
	want := []string{"root", "root.master", "root.master.alerts", "root.master.master", "root.other"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Walk visited %q, want %q", got, want)
	}
	// The paths handed to fn are not shared between calls.
	var paths [][]string
	testTree().Walk(func(path []string, _ *Node) bool {
		paths = append(paths, path)
		return true
	})
	if PathString(paths[2]) != "root.master.alerts" || PathString(paths[4]) != "root.master.master" {
		t.Errorf("Walk reused its path slices: %q", paths)
	}
}

func TestNode_RuleAndCount(t *testing.T) {
	t.Parallel()
	root := testTree()
	rs := root.Find([]string{"master", "alerts", "per_alert"})
	if r, i := rs.Rule("b"); r == nil || i != 1 {
		t.Errorf("Rule(b) = %v, %d", r, i)
	}
	if r, i := rs.Rule("z"); r != nil || i != -1 {
		t.Errorf("Rule(z) = %v, %d", r, i)
	}
	if got := root.Count(); got != (Counts{Filters: 3, Iterators: 1, Rules: 3}) {
		t.Errorf("Count() = %+v", got)
	}
	if got := rs.Count(); got != (Counts{Rules: 2}) {
		t.Errorf("ruleset Count() = %+v", got)
	}
	for k, want := range map[Kind]string{KindFilter: "Filter", KindIterator: "Iterator", KindRuleset: "Ruleset", 0: "Unknown"} {
		if k.String() != want {
			t.Errorf("Kind(%d).String() = %q", k, k.String())
		}
	}
	for k, want := range map[RegexKind]string{RegexIndexed: "Regex", RegexNamed: "RegexNamedGroups", RegexSingleKey: "KeyRegex", 0: "Unknown"} {
		if k.String() != want {
			t.Errorf("RegexKind(%d).String() = %q", k, k.String())
		}
	}
}

func TestParseOpType(t *testing.T) {
	t.Parallel()
	aliases := map[string]OpType{
		"AND": OpAnd, "OR": OpOr, "NOT": OpNot,
		"equals": OpEquals, "equal": OpEquals,
		"ne": OpNotEquals, "notEquals": OpNotEquals, "notEqual": OpNotEquals,
		"equalsIgnoreCase": OpEqualsIgnoreCase, "equalIgnoreCase": OpEqualsIgnoreCase,
		"contains": OpContains, "contain": OpContains,
		"containsIgnoreCase": OpContainsIgnoreCase, "containIgnoreCase": OpContainsIgnoreCase,
		"ge": OpGreaterEqual, "gt": OpGreater, "le": OpLessEqual, "lt": OpLess, "regex": OpRegex,
	}
	for name, want := range aliases {
		if got, ok := ParseOpType(name); !ok || got != want {
			t.Errorf("ParseOpType(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "and", "Equals", "EQUALS", "true", "startsWith", "notequals"} {
		if got, ok := ParseOpType(name); ok {
			t.Errorf("ParseOpType(%q) = %q, want unknown", name, got)
		}
	}
	binary := map[OpType]bool{OpAnd: false, OpOr: false, OpNot: false, OpRegex: false, OpEquals: true, OpLess: true, OpContainsIgnoreCase: true}
	for op, want := range binary {
		if op.IsBinary() != want {
			t.Errorf("%s.IsBinary() = %v", op, !want)
		}
	}
}
