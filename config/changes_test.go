package config

import (
	"strings"
	"testing"
)

// TestChanges lists the changes between two trees, node by node and rule
// by rule.
func TestChanges(t *testing.T) {
	t.Parallel()
	decode := func(s string) *Node {
		t.Helper()
		ex, err := DecodeExport([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return ex.Node
	}
	rule := func(name, where string) string {
		return `{"name": "` + name + `", "description": "", "continue": true, "active": true, "constraint": {"WHERE": ` + where + `, "WITH": {}}, "actions": []}`
	}
	eq := func(v string) string { return `{"type": "equals", "first": "${event.type}", "second": "` + v + `"}` }
	old := decode(`{"version": "1.1", "Filter": {"name": "root", "filter": {"description": "", "active": true, "filter": null}, "nodes": [
		{"Filter": {"name": "a", "filter": {"description": "", "active": true, "filter": ` + eq("a") + `}, "nodes": [
			{"Ruleset": {"name": "rs", "rules": [` + rule("keep", "null") + `, ` + rule("edit", eq("x")) + `, ` + rule("drop", "null") + `]}}]}},
		{"Ruleset": {"name": "gone", "rules": [` + rule("r", "null") + `]}},
		{"Ruleset": {"name": "kind", "rules": []}},
		{"Ruleset": {"name": "same", "rules": [` + rule("r", "null") + `]}}]}}`)
	newTree := decode(`{"version": "1.1", "Filter": {"name": "root", "filter": {"description": "", "active": true, "filter": null}, "nodes": [
		{"Ruleset": {"name": "same", "rules": [` + rule("r", "null") + `]}},
		{"Filter": {"name": "a", "filter": {"description": "now described", "active": true, "filter": ` + eq("b") + `}, "nodes": [
			{"Ruleset": {"name": "rs", "rules": [` + rule("edit", eq("y")) + `, ` + rule("keep", "null") + `, ` + rule("new", "null") + `]}}]}},
		{"Filter": {"name": "kind", "filter": {"description": "", "active": true, "filter": null}, "nodes": []}},
		{"Filter": {"name": "added", "filter": {"description": "", "active": true, "filter": null}, "nodes": [
			{"Ruleset": {"name": "x", "rules": [` + rule("r1", "null") + `, ` + rule("r2", "null") + `]}}]}}]}}`)
	var got []string
	for _, c := range Changes(old, newTree) {
		got = append(got, c.String())
	}
	want := []string{
		"~ root (Filter): nodes order",
		"~ root/a (Filter): description, filter",
		"~ root/a/rs (Ruleset): rules order",
		"~ root/a/rs/edit (rule): WHERE",
		"+ root/a/rs/new (rule)",
		"- root/a/rs/drop (rule)",
		"~ root/kind (Filter): kind (was Ruleset)",
		"+ root/added (Filter, 1 node, 2 rules)",
		"- root/gone (Ruleset, 1 rule)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c := Changes(old, old.Clone()); len(c) != 0 {
		t.Errorf("changes of a tree and its clone: %v", c)
	}
	if c := Changes(nil, old); len(c) != 1 || c[0].String() != "+ root (Filter, 5 nodes, 5 rules)" {
		t.Errorf("changes from nothing: %v", c)
	}
}
