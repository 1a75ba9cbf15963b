package action

import (
	"strings"
	"testing"

	"github.com/squallhq/squall/config"
)

func TestUnsupportedInTree(t *testing.T) {
	t.Parallel()
	rule := func(name string, actions ...*config.Action) *config.Rule {
		return &config.Rule{Name: name, Actions: actions}
	}
	foreach := &config.Action{ID: IDForeach, Payload: map[string]any{"target": "${event.payload.x}", "actions": []any{
		map[string]any{"id": "logger", "payload": map[string]any{}},
		map[string]any{"id": "icinga2", "payload": map[string]any{}},
	}}}
	root := &config.Node{Name: "root", Kind: config.KindFilter, Children: []*config.Node{
		{Name: "rs", Kind: config.KindRuleset, Rules: []*config.Rule{
			rule("ok", &config.Action{ID: IDLogger}, &config.Action{ID: IDArchive}),
			rule("mail", &config.Action{ID: "smtp"}),
			rule("nested", foreach),
		}},
	}}
	got := UnsupportedInTree(root, nil)
	if len(got) != 2 || got[0] != (Unsupported{"smtp", "root.rs", "mail"}) || got[1] != (Unsupported{"icinga2", "root.rs", "nested"}) {
		t.Fatalf("got %+v", got)
	}
	if s := got[0].String(); !strings.Contains(s, `action "smtp" in ruleset root.rs, rule mail`) || !strings.Contains(s, "logger") {
		t.Errorf("String() = %s", s)
	}
	if got := UnsupportedInTree(root.Children[0], []string{"root"}); len(got) != 2 || got[0].Ruleset != "root.rs" {
		t.Errorf("subtree: %+v", got)
	}
}
