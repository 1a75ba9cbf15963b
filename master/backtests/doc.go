// Package backtests runs backtests through the masters: an operator asks
// the masters for one (POST /squall/v1/backtests: a draft, or a version of
// the tree, against the active tree, over a range of the events topic),
// an engine claims it, runs it with engine/backtest outside its consumer
// group, reports its progress and posts its result, which the masters keep
// until it is deleted or expires (docs/api.md, "Backtests";
// docs/decisions.md decision 64).
//
// # On the masters
//
// [API] serves the routes on the leader (followers forward). Pending and
// running backtests, with their progress, live in the leader's memory.
// From feature level 7 (store.LevelBacktests) the masters also keep each
// backtest in the replicated state ([Keeper]): a small record when it is
// asked for, the finished backtest with its result (compressed, at most
// 1 MiB) when it ends, deletions and expiry. A backtest is shown
// finished only once that record is written (until then as it was:
// running, or pending with cancel_requested), and an engine's result is
// answered only then (503 otherwise: the engine posts it again), so that
// a finished state once seen survives any change of leader. A backtest
// whose record is unfinished when a new leader finds it is answered
// failed (LeaderChangedError) and written so, and its engine stops. Below that
// level a change of leader forgets them (decision 64). Each backtest holds the
// two trees it compares, copied when it was asked for, so that a deploy or
// an edit of the draft meanwhile changes nothing of it. Its range is
// resolved then too: a duration ("1h") becomes the times [now-1h, now).
//
// A backtest is pending until an engine claims it (POST
// /squall/v1/backtests/claim, a long poll), running while the engine
// reports its progress (PUT .../{id}/progress, every second), then
// succeeded, failed or cancelled once the engine posts its result (PUT
// .../{id}/result). An engine that stops hands its backtest back (Release)
// for another engine to run from the start. An engine that stops reporting for Config.LeaseTimeout
// loses it: the backtest is pending again for another engine, once
// (Config.MaxAttempts), then failed; a cancelled one is then cancelled. A
// backtest no engine claims within Config.PendingTimeout fails. Nothing
// stays running or pending forever.
//
// The masters keep at most Config.MaxKept backtests (the oldest finished
// ones go first; when every kept one is pending or running, a new one is
// refused 429), each result at most Config.MaxResultBytes, and drop a
// finished one Config.Keep after it finished. In the replicated state
// the bounds are enforced when the entries are applied, so every master
// prunes alike, and Config.MaxKeptBytes counts compressed results.
//
// Permissions: every route of operators needs edit on the root. A
// backtest reads the events of every tenant, and its sample holds their
// bodies; whoever may edit the whole tree can already send any event
// anywhere with an action, whereas view does not give the events' bodies
// (decision 59). A draft is backtested only by its owner, who alone may
// read it. The engines' routes need view and fleet_report on the root, as
// an engine's token has (a satellite's, fleet_report alone, has not: a
// claim answers whole trees); an engine's progress and result are taken
// only from the engine (and the user) that claimed the backtest.
//
// # On the engines
//
// [Worker] is the engines' side: it claims a backtest when it runs fewer
// than its maximum (one by default), runs it with the engine's own rate
// limit and CPU budget (a share of one core, measured on the backtest's
// thread), holds it while the engine's consumer lag grew past a bound
// (WorkerConfig.MaxLagGrowth), reports its progress every second, stops
// when the masters answer that it was cancelled or deleted, posts the
// result, and hands the backtest back when the engine stops.
//
// [Client] is the operators' client (squall backtest --master).
package backtests
