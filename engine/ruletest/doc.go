// Package ruletest runs rule tests: cases that each send one event through
// a processing tree and say what must happen to it, checked with the
// engines' own compiler and evaluator ([tree.Compile], [tree.Tree.Process]),
// so that a test passes exactly when an engine running the tree would do
// what it expects.
//
// # Files
//
// A test file ([Decode]) is a JSON object holding a list of cases:
//
//	{"cases": [{
//	  "name": "a critical alert is logged",
//	  "event": {"type": "alert", "created_ms": 1, "payload": {"severity": "critical"}},
//	  "match": ["root/alerts/log_critical"],
//	  "no_match": ["root/alerts/ignore_warnings"],
//	  "variables": {"root/alerts/log_critical": {"host": "db1"}},
//	  "actions": {"root/alerts/log_critical": [{"id": "logger", "payload": {"level": "critical"}}]}
//	}]}
//
// A rule is named by its path: the names of the nodes from the tree's top
// node down to its ruleset, then the rule's name, joined by "/" (the form
// of action positions, without the action's index). Below an iterator the
// path matches the rule in any iteration; "alerts[2]" instead of "alerts"
// selects one iteration (an array index, or an object key escaped as in a
// URL query).
//
// Expectations: every rule of match has the status Matched (in at least
// one iteration); no rule of no_match has it; the variables a rule
// extracted include the ones listed, with those values; the actions of a
// rule include, for each one listed, a distinct action with that id whose
// payload holds the listed fields. Objects are compared as subsets
// everywhere (keys the expectation leaves out are ignored); arrays,
// strings, booleans and null must be equal; numbers are compared by value
// (1 equals 1.0). A path that names no rule of the tree fails the case.
//
// Decoding is strict: unknown fields, a case without a name or without
// expectations, two cases with one name and malformed paths are errors
// naming the file, the case and the field.
//
// # Results
//
// [Runner.Run] checks one file and returns a [FileResult]: for every case
// its [Failure] values, each naming the rule and the expectation with what
// was expected and what happened. [WriteJUnit] writes results as JUnit XML
// for CI systems.
package ruletest
