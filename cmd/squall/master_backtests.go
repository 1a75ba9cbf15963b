package main

import (
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/master/backtests"
)

// backtestListFlags defines the masters' settings of the backtests API.
func backtestListFlags(f *pflag.FlagSet, c *backtests.Config) {
	f.Int64Var(&c.MaxEvents, "backtest-max-events", c.MaxEvents, "events one backtest reads at most (a request may ask fewer); a larger range keeps the latest events of each partition")
	f.IntVar(&c.MaxSample, "backtest-max-sample", c.MaxSample, "differing events one backtest may keep with both outcomes")
	f.IntVar(&c.MaxKept, "backtests-max-kept", c.MaxKept, "backtests the masters keep (the oldest finished go first; when all are pending or running a new one is refused 429)")
	f.DurationVar(&c.Keep, "backtests-keep", c.Keep, "how long a finished backtest is kept")
	f.IntVar(&c.MaxKeptBytes, "backtests-max-bytes", c.MaxKeptBytes, "bytes of results kept in all (from feature level 7 compressed, in the replicated state; below, JSON in the leader's memory); the oldest finished backtests go first")
	f.DurationVar(&c.LeaseTimeout, "backtest-lease-timeout", c.LeaseTimeout, "how long a running backtest waits for its engine's progress report before another engine runs it again (or, after --backtest-max-attempts, it fails)")
	f.IntVar(&c.MaxAttempts, "backtest-max-attempts", c.MaxAttempts, "engines that may claim one backtest before it fails")
	f.DurationVar(&c.PendingTimeout, "backtest-pending-timeout", c.PendingTimeout, "how long a backtest waits for an engine before it fails")
}
