package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/engine"
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/console"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/master/treestats"
	"github.com/squallhq/squall/satellite"
)

// mountConsole serves the console at /ui/ on every node (it is static,
// and the API calls it makes are forwarded to the leader like any other),
// and the fleet API and the tree stats on the leader, where heartbeats
// are kept.
func mountConsole(srv *master.Server, copts console.Options, fcfg fleet.Config, reg prometheus.Registerer, logger *slog.Logger) (*fleet.Fleet, error) {
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

// fleetListFlags defines the fleet list's settings of a master.
func fleetListFlags(f *pflag.FlagSet, c *fleet.Config) {
	f.DurationVar(&c.StaleAfter, "fleet-stale-after", c.StaleAfter, "how long after its last heartbeat an engine or satellite is shown as stale in the fleet list (a few times their --fleet-interval)")
	f.DurationVar(&c.DropAfter, "fleet-drop-after", c.DropAfter, "how long after its last heartbeat an engine or satellite is dropped from the fleet list")
	f.IntVar(&c.MaxPerReporter, "fleet-max-per-reporter", c.MaxPerReporter,
		"the most engines and satellites one reporter (the user its heartbeat token names) may hold in the fleet list, of its 1,000")
}

// checkFleetList checks the fleet list's settings.
func checkFleetList(c fleet.Config) error {
	if c.StaleAfter <= 0 || c.DropAfter < c.StaleAfter {
		return fmt.Errorf("--fleet-stale-after %s and --fleet-drop-after %s: want 0 < stale ≤ drop", c.StaleAfter, c.DropAfter)
	}
	if c.MaxPerReporter < 1 || c.MaxPerReporter > c.MaxMembers {
		return fmt.Errorf("--fleet-max-per-reporter %d: want 1 to %d", c.MaxPerReporter, c.MaxMembers)
	}
	return nil
}

// consoleLink is the console's address that signs in with token: the
// fragment never reaches the server, and the page moves it into the
// tab's session storage and clears it from the address bar.
func consoleLink(addr, token string) string {
	return "http://" + addr + console.Prefix + "#token=" + token
}

// devHeartbeat is how often squall dev reports its engine and intake: in
// the process, a report costs a map write, so the list follows their
// state within a second.
const devHeartbeat = time.Second

// reportDevFleet reports squall dev's engine and webhook intake to its own
// fleet list every devHeartbeat until ctx ends, as a separate engine and
// satellite would over HTTP.
func reportDevFleet(ctx context.Context, f *fleet.Fleet, s *satellite.Satellite, e *engine.Service) error {
	t := time.NewTicker(devHeartbeat)
	defer t.Stop()
	for {
		now := time.Now()
		// The list of a process has room for its own two parts, which
		// it reports as the reporter "dev".
		_ = f.Report(satelliteReport("dev", "dev", s.Status()), "dev", now)
		_ = f.Report(engineReport("dev", "dev", e), "dev", now)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
