package main

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
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

// deadLetterRoutes are the dead-letter API's routes and where they run:
// reads on any node (they read Kafka, not the replicated state), replays
// on the leader (one node paces them and runs them one request at a
// time).
var deadLetterRoutes = []struct {
	pattern   string
	placement master.Placement
}{
	{http.MethodGet + " " + deadletters.Prefix, master.OnAnyNode},
	{http.MethodGet + " " + deadletters.Prefix + "/", master.OnAnyNode},
	{http.MethodPost + " " + deadletters.Prefix + "/replay", master.OnLeader},
}

// newDeadLetterAPI builds the dead-letter API, reaching the brokers as
// dial says. The returned function closes its producer.
func newDeadLetterAPI(cfg deadletters.Config, dial kafkasource.Dial, tokens deadletters.Tokens, logger *slog.Logger) (*deadletters.API, func() error, error) {
	reader, err := kafkasource.NewReader(dial)
	if err != nil {
		return nil, nil, err
	}
	writer, err := kafkasource.NewWriter(kafkasource.WriterConfig{Dial: dial, Topic: cfg.EventsTopic})
	if err != nil {
		return nil, nil, err
	}
	a, err := deadletters.New(cfg, reader, writer, tokens, logger)
	if err != nil {
		return nil, nil, errors.Join(err, writer.Close())
	}
	return a, writer.Close, nil
}

// mountDeadLetters serves the dead-letter API on srv, reaching the brokers
// as the webhook intake does (k: --kafka-brokers and the TLS and SASL
// flags; replays go to its topic). The returned function closes the
// producer.
func mountDeadLetters(srv *master.Server, cfg deadletters.Config, k kafkasink.Config, reg prometheus.Registerer, logger *slog.Logger) (func() error, error) {
	cfg.EventsTopic = k.Topic
	cfg.Registerer = reg
	dial := kafkasource.Dial{Brokers: k.Brokers, ClientID: "squall-master", TLS: k.TLS, SASL: k.SASL, Timeout: k.DialTimeout}
	a, closeAPI, err := newDeadLetterAPI(cfg, dial, srv.Verifier(), logger)
	if err != nil {
		return nil, err
	}
	h := a.Handler()
	for _, r := range deadLetterRoutes {
		if err := srv.Mount(r.pattern, h, r.placement); err != nil {
			return nil, errors.Join(err, closeAPI())
		}
	}
	return closeAPI, nil
}
