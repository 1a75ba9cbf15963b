// Package tree compiles a processing tree of package config into an
// evaluator and runs events through it.
//
// [Compile] validates a tree and turns it into a [Tree], immutable and safe
// for concurrent use. An event is evaluated in one of two ways:
//
//   - [Tree.Process] is for test events: it returns the processed result
//     tree (every filter's status, every iteration, every rule's outcome,
//     extracted variables and action metadata) and the actions to execute.
//   - [Tree.Actions] is for live traffic: it returns only the actions of
//     matched rules, and visits only the branches that can match, thanks to
//     an index of the equalities on event fields that filters and rules
//     require (see DESIGN.md beside this file).
//
// Both give the same actions for the same event. [Tree.Explain] explains a
// test event: why each filter, iterator and rule came out as it did, with
// each condition as evaluated. Events are decoded with [DecodeEvent],
// which keeps integers and floats apart.
package tree
