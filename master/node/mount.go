package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/backtests"
	"github.com/squallhq/squall/master/console"
	"github.com/squallhq/squall/master/deadletters"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/treestats"
	"github.com/squallhq/squall/satellite"
)

// MountConsole serves the console at /ui/ on every node (it is static,
// and the API calls it makes are forwarded to the leader like any other),
// and the fleet API and the tree stats on the leader, where heartbeats
// are kept.
func MountConsole(srv *master.Server, copts console.Options, fcfg fleet.Config, reg prometheus.Registerer, logger *slog.Logger) (*fleet.Fleet, error) {
	c, err := console.New(copts)
	if err != nil {
		return nil, err
	}
	if err := srv.Mount("GET "+console.Prefix, c, master.OnAnyNode); err != nil {
		return nil, err
	}
	fcfg.Leading = srv.Store().IsLeader
	// The engines' tree stats come with their heartbeats, to the leader.
	stats := treestats.New(treestats.Config{})
	fcfg.Stats = stats
	if err := srv.Mount("GET "+treestats.Pattern, stats.Handler(srv.Store(), srv.Verifier()), master.OnLeader); err != nil {
		return nil, err
	}
	f := fleet.New(fcfg, srv.Verifier(), srv.FleetMasters, logger)
	// squall_fleet_partitions_unowned and squall_fleet_group_engines, on
	// the leader.
	if reg != nil {
		if err := reg.Register(f); err != nil {
			return nil, fmt.Errorf("fleet metrics: %w", err)
		}
	}
	// Every method: the handler answers the ones it does not serve 405
	// with Allow and a JSON error.
	if err := srv.Mount(fleet.Pattern+"/", f.Handler(), master.OnLeader); err != nil {
		return nil, err
	}
	return f, srv.Mount(fleet.Pattern, f.Handler(), master.OnLeader)
}

// CheckFleet checks the fleet list's settings (flags of squall master
// and dev).
func CheckFleet(c fleet.Config) error {
	if c.StaleAfter <= 0 || c.DropAfter < c.StaleAfter {
		return fmt.Errorf("--fleet-stale-after %s and --fleet-drop-after %s: want 0 < stale ≤ drop", c.StaleAfter, c.DropAfter)
	}
	if c.MaxPerReporter < 1 || c.MaxPerReporter > c.MaxMembers {
		return fmt.Errorf("--fleet-max-per-reporter %d: want 1 to %d", c.MaxPerReporter, c.MaxMembers)
	}
	return nil
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

// NewDeadLetterAPI builds the dead-letter API, reaching the brokers as
// dial says. The returned function closes its producer.
func NewDeadLetterAPI(cfg deadletters.Config, dial kafkasource.Dial, tokens deadletters.Tokens, logger *slog.Logger) (*deadletters.API, func() error, error) {
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

// MountDeadLetters mounts h on the dead-letter API's routes.
func MountDeadLetters(srv *master.Server, h http.Handler) error {
	var errs []error
	for _, r := range deadLetterRoutes {
		errs = append(errs, srv.Mount(r.pattern, h, r.placement))
	}
	return errors.Join(errs...)
}

// mountDeadLetters serves the dead-letter API on srv, reaching the
// brokers as the webhook intake does (its brokers, TLS and SASL; replays
// go to its topic). The returned function closes the producer.
func mountDeadLetters(srv *master.Server, cfg deadletters.Config, in satellite.Config, reg prometheus.Registerer, logger *slog.Logger) (func() error, error) {
	k := in.Kafka
	cfg.EventsTopic = k.Topic
	cfg.Registerer = reg
	dial := kafkasource.Dial{Brokers: k.Brokers, ClientID: "squall-master", TLS: k.TLS, SASL: k.SASL, Timeout: k.DialTimeout}
	a, closeAPI, err := NewDeadLetterAPI(cfg, dial, srv.Verifier(), logger)
	if err != nil {
		return nil, err
	}
	if err := MountDeadLetters(srv, a.Handler()); err != nil {
		return nil, errors.Join(err, closeAPI())
	}
	return closeAPI, nil
}

// MountBacktests serves the backtests API (/squall/v1/backtests) on the
// leader, registers squall_master_backtests with reg (nil: none), and
// returns the function that forgets the backtests when this node stops
// leading (run it until the master stops).
func MountBacktests(srv *master.Server, cfg backtests.Config, reg prometheus.Registerer, logger *slog.Logger) (func(context.Context) error, error) {
	a, err := backtests.New(cfg, srv.Store(), srv.Verifier(), logger)
	if err != nil {
		return nil, err
	}
	if reg != nil {
		if err := reg.Register(a); err != nil {
			return nil, fmt.Errorf("backtests metrics: %w", err)
		}
	}
	h := a.Handler()
	for _, p := range []string{backtests.Prefix, backtests.Prefix + "/"} {
		if err := srv.Mount(p, h, master.OnLeader); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) error { return a.Follow(ctx, srv.Store()) }, nil
}
