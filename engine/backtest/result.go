package backtest

import (
	"encoding/json"
	"time"
)

// Result is what a backtest counted. Its JSON form is the one
// docs/operations.md ("Backtest") describes.
type Result struct {
	// Topic is the topic read.
	Topic string `json:"topic"`
	// Partitions are the offsets read of each partition.
	Partitions []PartitionRange `json:"partitions"`
	// RangeEvents is the number of records the range holds; Truncated
	// says MaxEvents cut it.
	RangeEvents int64 `json:"range_events"`
	Truncated   bool  `json:"truncated"`
	// Events is the number of records read; Undecodable those that are
	// not events (evaluated by neither tree).
	Events      int64 `json:"events"`
	Undecodable int64 `json:"undecodable"`
	// DifferingEvents is the number of events whose outcome differs.
	DifferingEvents int64 `json:"differing_events"`
	// Rules are the rules of both trees, the active tree's first, each
	// with the events it matched under each tree.
	Rules []RuleCount `json:"rules"`
	// DifferingRules are the paths of the rules whose counts differ.
	DifferingRules []string `json:"differing_rules"`
	// Rulesets are the rulesets of both trees with their counts.
	Rulesets []RulesetCount `json:"rulesets"`
	// Samples are the first differing events, with both outcomes.
	Samples []Sample `json:"samples"`
	// Complete is false when the backtest stopped before the end of the
	// range (cancelled, or a read failed).
	Complete bool `json:"complete"`
	// Started and Finished bound the run; Rate is Events per second of
	// it.
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Rate     float64       `json:"rate"`
}

// PartitionRange is the range of offsets read of one partition: From up
// to To, excluded.
type PartitionRange struct {
	Partition int   `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
}

// RuleCount is how many events a rule matched under each tree (an event
// counts once, whatever the iterations that matched).
type RuleCount struct {
	// Rule is the rule's path: node names from the top node, then the
	// rule's name.
	Rule      string `json:"rule"`
	Active    int64  `json:"active"`
	Candidate int64  `json:"candidate"`
	// Only is "active" or "candidate" when one tree alone has the rule.
	Only string `json:"only,omitempty"`
}

// RulesetCount is how a ruleset fared under each tree.
type RulesetCount struct {
	Ruleset   string         `json:"ruleset"`
	Active    RulesetOutcome `json:"active"`
	Candidate RulesetOutcome `json:"candidate"`
	// Only is "active" or "candidate" when one tree alone has the ruleset.
	Only string `json:"only,omitempty"`
}

// RulesetOutcome counts the events that reached a ruleset and those for
// which one of its rules matched.
type RulesetOutcome struct {
	Reached int64 `json:"reached"`
	Matched int64 `json:"matched"`
}

// Sample is an event whose outcome differs.
type Sample struct {
	Partition int       `json:"partition"`
	Offset    int64     `json:"offset"`
	Time      time.Time `json:"time"`
	EventID   string    `json:"event_id,omitempty"`
	// Event is the record's value, absent when it is over
	// MaxSampleEventBytes; EventBytes is its size.
	Event      json.RawMessage `json:"event,omitempty"`
	EventBytes int             `json:"event_bytes"`
	Active     Outcome         `json:"active"`
	Candidate  Outcome         `json:"candidate"`
}

// Outcome is what one tree did with an event: the rules that matched (with
// their iterations: "root/hosts[3]/alerts/notify") and the actions it
// resolved, in tree order.
type Outcome struct {
	Matched []string         `json:"matched"`
	Actions []ResolvedAction `json:"actions"`
}

// ResolvedAction is an action a matched rule resolved, not run.
type ResolvedAction struct {
	ID       string         `json:"id"`
	Position string         `json:"position"`
	Payload  map[string]any `json:"payload"`
}
