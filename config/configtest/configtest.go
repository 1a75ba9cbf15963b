// Package configtest makes processing trees for tests and benchmarks.
package configtest

import (
	"fmt"

	"github.com/squallhq/squall/config"
)

// LargeTree returns a tree of rules rules spread over 20 tenants: under
// the root, a filter per tenant (tenant0 … tenant19, on
// ${event.metadata.tenant_id}) holding a ruleset "rules" of rule_0,
// rule_1, …, each with a condition on ${event.type} and a logger action:
// about 240 bytes of export file per rule. The draft benchmarks of the
// store and the API edit its rules.
func LargeTree(rules int) *config.Node {
	root := config.NewRoot()
	const tenants = 20
	for t := range tenants {
		name := fmt.Sprintf("tenant%d", t)
		rs := &config.Node{Kind: config.KindRuleset, Name: "rules"}
		for i := range rules / tenants {
			rs.Rules = append(rs.Rules, &config.Rule{Name: fmt.Sprintf("rule_%d", i), Active: true, Continue: true,
				Where:   &config.Operator{Type: config.OpEquals, First: "${event.type}", Second: fmt.Sprintf("type_%d", i)},
				Actions: []*config.Action{{ID: "logger", Payload: map[string]any{"msg": "rule ${event.type} matched"}}}})
		}
		root.Children = append(root.Children, &config.Node{Kind: config.KindFilter, Name: name, Active: true,
			Filter:   &config.Operator{Type: config.OpEquals, First: "${event.metadata.tenant_id}", Second: name},
			Children: []*config.Node{rs}})
	}
	return root
}
