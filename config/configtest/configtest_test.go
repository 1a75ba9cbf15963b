package configtest

import (
	"testing"

	"github.com/squallhq/squall/config"
)

// TestLargeTree: the tree is valid and holds the rules asked for, 20
// tenants' worth.
func TestLargeTree(t *testing.T) {
	tree := LargeTree(2_000)
	if err := config.Validate(tree); err != nil {
		t.Fatal(err)
	}
	if len(tree.Children) != 20 {
		t.Fatalf("%d tenants", len(tree.Children))
	}
	rs := tree.Find([]string{"tenant7", "rules"})
	if rs == nil || len(rs.Rules) != 100 {
		t.Fatalf("ruleset of tenant7: %+v", rs)
	}
	if r, _ := rs.Rule("rule_50"); r == nil {
		t.Fatal("no rule_50 in tenant7's rules")
	}
}
