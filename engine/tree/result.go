package tree

import (
	"encoding/json"

	"github.com/squallhq/squall/config"
)

// Status is the outcome of a filter or an iterator.
type Status string

// Node statuses. An inactive filter is Ignored (docs/decisions.md decision 2).
const (
	StatusMatched       Status = "Matched"
	StatusNotMatched    Status = "NotMatched"
	StatusIgnored       Status = "Ignored"
	StatusAccessorError Status = "AccessorError"
	StatusTypeError     Status = "TypeError"
)

// RuleStatus is the outcome of a rule.
type RuleStatus string

// Rule statuses. Inactive rules and rules after a rule that stopped its
// ruleset are NotProcessed (docs/decisions.md decision 3).
const (
	RuleMatched          RuleStatus = "Matched"
	RuleNotMatched       RuleStatus = "NotMatched"
	RulePartiallyMatched RuleStatus = "PartiallyMatched"
	RuleNotProcessed     RuleStatus = "NotProcessed"
)

// ProcessedNode is one node of a test event's result tree.
type ProcessedNode struct {
	Kind config.Kind
	Name string
	// Status is the filter's or the iterator's outcome.
	Status Status
	// Nodes are a filter's processed children (empty unless Matched).
	Nodes []*ProcessedNode
	// Events are an iterator's iterations.
	Events []ProcessedIteration
	// Rules is a ruleset's outcome.
	Rules *ProcessedRules
}

// ProcessedIteration is one iteration of an iterator: the event with its
// iterator field, and the processed children.
type ProcessedIteration struct {
	Event *Event           `json:"event"`
	Nodes []*ProcessedNode `json:"nodes"`
}

// ProcessedRules is the outcome of a ruleset.
type ProcessedRules struct {
	Rules []ProcessedRule `json:"rules"`
	// ExtractedVars maps rule names to the variables they extracted.
	ExtractedVars map[string]map[string]any `json:"extracted_vars"`
}

// ProcessedRule is the outcome of one rule.
type ProcessedRule struct {
	Name    string     `json:"name"`
	Status  RuleStatus `json:"status"`
	Actions []Action   `json:"actions"`
	// Message explains a PartiallyMatched status.
	Message *string   `json:"message"`
	Meta    *RuleMeta `json:"meta"`
}

// MarshalJSON writes the rule with its actions twice, as the spec names
// them (action) and as Tornado does (actions), so that clients of either
// find them (DESIGN decision 18).
func (r ProcessedRule) MarshalJSON() ([]byte, error) {
	type plain ProcessedRule // without this method
	return json.Marshal(struct {
		Action []Action `json:"action"`
		plain
	}{r.Actions, plain(r)})
}

// RuleMeta holds the resolved actions with how each value was obtained.
type RuleMeta struct {
	Actions []ActionMeta `json:"actions"`
}

type statusJSON struct {
	Status Status `json:"status"`
}

// MarshalJSON writes the ProcessedNode form of the spec.
func (p *ProcessedNode) MarshalJSON() ([]byte, error) {
	switch p.Kind {
	case config.KindFilter:
		return json.Marshal(struct {
			Type   string           `json:"type"`
			Name   string           `json:"name"`
			Filter statusJSON       `json:"filter"`
			Nodes  []*ProcessedNode `json:"nodes"`
		}{"Filter", p.Name, statusJSON{p.Status}, nonNil(p.Nodes)})
	case config.KindIterator:
		events := p.Events
		if events == nil {
			events = []ProcessedIteration{}
		}
		return json.Marshal(struct {
			Type     string               `json:"type"`
			Name     string               `json:"name"`
			Iterator statusJSON           `json:"iterator"`
			Events   []ProcessedIteration `json:"events"`
		}{"Iterator", p.Name, statusJSON{p.Status}, events})
	}
	rules := p.Rules
	if rules == nil {
		rules = &ProcessedRules{}
	}
	if rules.Rules == nil {
		rules.Rules = []ProcessedRule{}
	}
	if rules.ExtractedVars == nil {
		rules.ExtractedVars = map[string]map[string]any{}
	}
	return json.Marshal(struct {
		Type  string          `json:"type"`
		Name  string          `json:"name"`
		Rules *ProcessedRules `json:"rules"`
	}{"Ruleset", p.Name, rules})
}

func nonNil(n []*ProcessedNode) []*ProcessedNode {
	if n == nil {
		return []*ProcessedNode{}
	}
	return n
}
