package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/master/fleet"
)

// fleetFlags are the settings of a process's heartbeats to the masters'
// fleet list (GET /squall/v1/fleet).
type fleetFlags struct {
	name, site string
	interval   time.Duration
}

func (o *fleetFlags) define(f *pflag.FlagSet, nameFlag bool) {
	if nameFlag {
		f.StringVar(&o.name, "name", "", "this engine's id in the masters' fleet list (default: the host name)")
	}
	f.StringVar(&o.site, "site", "", "site (data center, region) shown for this process in the masters' fleet list")
	f.DurationVar(&o.interval, "fleet-interval", fleet.DefaultReportInterval,
		"how often the heartbeat goes to the masters' fleet list (0: none); the list marks a member stale after 30s without one")
}

// id returns the member id: the name given, else the host name.
func (o *fleetFlags) id() (string, error) {
	if o.name != "" {
		return o.name, nil
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", fmt.Errorf("no --name and no host name for the fleet list: %v", err)
	}
	return h, nil
}

// reporter returns the heartbeat reporter of a process, or nil when
// heartbeats are off (an interval of 0).
func (o *fleetFlags) reporter(masters []string, token string, client *http.Client, logger *slog.Logger, reg prometheus.Registerer, status func() fleet.Report) (*fleet.Reporter, error) {
	if o.interval == 0 {
		logger.Info("fleet heartbeats off (--fleet-interval 0): the masters' fleet list will not show this process")
		return nil, nil
	}
	if o.interval < 0 {
		return nil, errors.New("--fleet-interval must not be negative")
	}
	return fleet.NewReporter(fleet.ReporterConfig{MasterURLs: masters, Token: token, Client: client,
		Interval: o.interval, Logger: logger, Registerer: reg}, status)
}

// runReporter runs r until ctx ends; a nil r waits for ctx.
func runReporter(ctx context.Context, r *fleet.Reporter) error {
	if r == nil {
		<-ctx.Done()
		return nil
	}
	return r.Run(ctx)
}
