// Package backtest runs a candidate processing tree and the active one over
// a range of the events topic and reports where they differ, running no
// action.
//
// A [Backtest] is built by [New] from a [Spec]: the two trees (config
// model, compiled with [tree.Compile]), the topic, the range (the last N
// records of each partition, or the records whose timestamps fall in
// [since, until)), a bound on the events read, a sample size and a rate
// limit. [Backtest.Run] reads the range with a [Reader] outside any
// consumer group ([kafkasource.Reader]: no group, no commit, so no group's
// offsets move), decodes each record as the engine does
// ([tree.DecodeEvent]), evaluates it with both trees as a test event
// ([tree.Tree.Process], the evaluation rule tests use, which the engine's
// oracle keeps equal to the live one) and counts:
//
//   - per rule, under each tree, the events for which it matched (once per
//     event, whatever the iterations that matched);
//   - per ruleset, the events that reached it and those for which one of
//     its rules matched;
//   - the events whose outcome differs: the matched rules (with their
//     iterations) or the resolved actions (id, position, payload) are not
//     the same under both trees. The first [Spec.Sample] of them are kept
//     with both outcomes.
//
// A rule or ruleset is named by its path from the tree's top node
// ("root/alerts/notify"), as rule tests and action positions name it; a
// rule present in one tree only counts 0 in the other.
//
// # Bounds
//
// The range is cut to [Spec.MaxEvents]: when it holds more, each
// partition keeps its latest records, in proportion to its share of the
// range, and the result says Truncated. Partitions are read in turn, a
// chunk of at most 500 records or 4 MiB at a time, one connection to the
// partition's leader per chunk; the chunk is evaluated after the
// connection is closed, so a slow evaluation never holds a connection.
// One goroutine reads and evaluates: a backtest uses at most one core, and
// [Spec.Rate] bounds it further (a token bucket of events per second),
// and so does [Spec.CPU], a share of one core: the goroutine is locked to
// its thread, whose CPU time it reads every 16 events, and once it used
// 10 ms it pauses until that is its share of the time since the last
// pause.
// [Backtest.Progress] reports the events read of the range and the rate
// while it runs, from any goroutine.
//
// Unlike the engine, a backtest does not skip events by their
// squall-event-id (every record of the range counts once) and does not set
// ${event.trace_id} from the record's traceparent header. A record that is
// not an event counts as Undecodable and is evaluated by neither tree.
//
// # Cancel
//
// When Run's context ends, Run stops at the next event and returns what
// it counted so far (Complete false) with the context's error.
package backtest
