package main

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/spf13/pflag"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/deadletters"
	"github.com/squallhq/squall/satellite/kafkasink"
)

// deadLetterFlags defines the flags of the masters' dead-letter API.
func deadLetterFlags(f *pflag.FlagSet, cfg *deadletters.Config) {
	f.StringVar(&cfg.Topic, "dlq-topic", cfg.Topic, "the engines' dead-letter topic, which the dead-letter API (/squall/v1/deadletters, served with --kafka-brokers) reads; replays go to --topic")
	f.IntVar(&cfg.MaxReplays, "deadletters-max-replays", cfg.MaxReplays, "times one event may be replayed from the dead-letter topic; past it a replay is refused and the event stays dead")
	f.IntVar(&cfg.ScanLimit, "deadletters-scan-limit", cfg.ScanLimit, "dead-letter records one request of the dead-letter API reads at most")
	f.Float64Var(&cfg.ReplayRate, "deadletters-replay-rate", cfg.ReplayRate, "dead letters replayed per second at most (by the leader)")
}

// mountDeadLetters serves the dead-letter API on srv: reads on any node
// (they read Kafka, not the replicated state), replays on the leader
// (one node paces them and runs them one request at a time). It reaches
// the brokers as the webhook intake does (k: --kafka-brokers and the
// TLS and SASL flags). The returned function closes the producer.
func mountDeadLetters(srv *master.Server, cfg deadletters.Config, k kafkasink.Config, logger *slog.Logger) (func() error, error) {
	dial := kafkasource.Dial{Brokers: k.Brokers, ClientID: "squall-master", TLS: k.TLS, SASL: k.SASL, Timeout: k.DialTimeout}
	cfg.EventsTopic = k.Topic
	reader, err := kafkasource.NewReader(dial)
	if err != nil {
		return nil, err
	}
	writer, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: dial, Topic: cfg.EventsTopic})
	if err != nil {
		return nil, err
	}
	a, err := deadletters.New(cfg, reader, writer, srv.Verifier(), logger)
	if err != nil {
		return nil, errors.Join(err, writer.Close())
	}
	h := a.Handler()
	for _, m := range []struct {
		pattern   string
		placement master.Placement
	}{
		{http.MethodGet + " " + deadletters.Prefix, master.OnAnyNode},
		{http.MethodGet + " " + deadletters.Prefix + "/", master.OnAnyNode},
		{http.MethodPost + " " + deadletters.Prefix + "/replay", master.OnLeader},
	} {
		if err := srv.Mount(m.pattern, h, m.placement); err != nil {
			return nil, errors.Join(err, writer.Close())
		}
	}
	return writer.Close, nil
}
