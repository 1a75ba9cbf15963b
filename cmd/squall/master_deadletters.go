package main

import (
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/master/deadletters"
)

// deadLetterFlags defines the flags of the masters' dead-letter API.
func deadLetterFlags(f *pflag.FlagSet, cfg *deadletters.Config) {
	f.StringVar(&cfg.Topic, "dlq-topic", cfg.Topic, "the engines' dead-letter topic, which the dead-letter API (/squall/v1/deadletters, served with --kafka-brokers) reads; replays go to --topic")
	f.IntVar(&cfg.MaxReplays, "deadletters-max-replays", cfg.MaxReplays, "times one event may be replayed from the dead-letter topic; past it a replay is refused and the event stays dead")
	f.IntVar(&cfg.ScanLimit, "deadletters-scan-limit", cfg.ScanLimit, "dead-letter records one request of the dead-letter API reads at most")
	f.Float64Var(&cfg.ReplayRate, "deadletters-replay-rate", cfg.ReplayRate, "dead letters replayed per second at most (by the leader)")
}
