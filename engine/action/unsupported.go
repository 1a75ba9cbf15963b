package action

import (
	"fmt"
	"slices"
	"strings"

	"github.com/squallhq/squall/config"
)

// Unsupported is an action of a tree whose id no built-in executor has
// (see [BuiltinIDs]): no engine or master built from this package can run
// it, whatever its settings.
type Unsupported struct {
	// ID is the action's id.
	ID string
	// Ruleset is the path of the ruleset holding the rule, dot-separated.
	Ruleset string
	// Rule is the rule's name.
	Rule string
}

// String says where the action is.
func (u Unsupported) String() string {
	return fmt.Sprintf("action %q in ruleset %s, rule %s has no executor (the executors are %s)", u.ID, u.Ruleset, u.Rule, strings.Join(BuiltinIDs(), ", "))
}

// UnsupportedInTree lists, in tree order, the actions of the subtree n
// (whose parent's path is parent: nil for the root) that no built-in
// executor handles, those nested in foreach actions included.
func UnsupportedInTree(n *config.Node, parent []string) []Unsupported {
	var bad []Unsupported
	var walk func(n *config.Node, path []string)
	walk = func(n *config.Node, path []string) {
		path = append(path, n.Name)
		for _, r := range n.Rules {
			bad = append(bad, UnsupportedInRule(r, path)...)
		}
		for _, c := range n.Children {
			walk(c, path)
		}
	}
	if n != nil {
		walk(n, slices.Clip(parent))
	}
	return bad
}

// UnsupportedInRule lists the actions of rule r of the ruleset at path
// that no built-in executor handles, those nested in foreach included.
func UnsupportedInRule(r *config.Rule, ruleset []string) []Unsupported {
	var bad []Unsupported
	where := config.PathString(ruleset)
	var check func(id string, payload map[string]any)
	check = func(id string, payload map[string]any) {
		if !slices.Contains(BuiltinIDs(), id) {
			bad = append(bad, Unsupported{ID: id, Ruleset: where, Rule: r.Name})
			return
		}
		if id != IDForeach {
			return
		}
		nested, _ := payload["actions"].([]any)
		for _, a := range nested {
			m, _ := a.(map[string]any)
			nid, _ := m["id"].(string)
			np, _ := m["payload"].(map[string]any)
			check(nid, np)
		}
	}
	for _, a := range r.Actions {
		check(a.ID, a.Payload)
	}
	return bad
}
