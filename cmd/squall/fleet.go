package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/squallhq/squall/engine"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/satellite"
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

// satelliteReport is the heartbeat of a satellite (or of squall dev's
// intake) in state st.
func satelliteReport(id, site string, st satellite.Status) fleet.Report {
	var reasons []string
	if !st.Ready {
		switch {
		case st.Webhooks.Generation == 0:
			reasons = append(reasons, "webhooks not loaded yet")
		case st.Spool.Full:
			reasons = append(reasons, "spool full: calls are refused until it drains to Kafka")
		default:
			reasons = append(reasons, "not serving")
		}
		if st.Mode != "" && st.Mode != "direct" {
			reasons = append(reasons, "mode "+st.Mode+": Kafka is not taking events, they wait in the spool")
		}
	}
	depth, loaded := st.Spool.Records, int64(st.Webhooks.Loaded)
	return fleet.Report{ID: id, Role: fleet.RoleSatellite, Site: site, Version: versionString(), Ready: st.Ready,
		Reasons: reasons, SpoolDepth: &depth, WebhooksLoaded: &loaded}
}

// engineReport is the heartbeat of an engine.
func engineReport(id, site string, e *engine.Service) fleet.Report {
	ready, reasons, warnings := e.Readiness()
	r := fleet.Report{ID: id, Role: fleet.RoleEngine, Site: site, Version: versionString(), Ready: ready, Reasons: reasons, Warnings: warnings}
	if lag, ok := e.ConsumerLag(); ok {
		r.ConsumerLag = &lag
	}
	// The masters find the partitions of the group no live engine owns.
	o := e.Ownership()
	r.KafkaGroup, r.KafkaTopic, r.Partitions = o.Group, o.Topic, o.Partitions
	// A count read before partitions were added is no count.
	if o.TopicPartitions > 0 && (len(o.Partitions) == 0 || slices.Max(o.Partitions) < o.TopicPartitions) {
		n := int64(o.TopicPartitions)
		r.TopicPartitions = &n
	}
	if st, ok := e.TreeStats(); ok && st.TreeIndex > 0 {
		r.TreeStats = reportedStats(st)
	}
	return r
}

// reportedStats are the tree stats of a heartbeat: the nodes an event
// reached, with their rules, up to fleet.MaxStatsEntries.
func reportedStats(st engine.TreeStats) *fleet.TreeStats {
	out := &fleet.TreeStats{TreeIndex: st.TreeIndex, Instance: st.Instance, LoadedMS: st.Loaded.UnixMilli(), Events: st.Events, Nodes: []fleet.NodeStats{}}
	entries := 0
	for _, n := range st.Nodes {
		if n.Reached == 0 {
			continue
		}
		if entries += 1 + len(n.Rules); entries > fleet.MaxStatsEntries {
			out.Truncated = true
			break
		}
		ns := fleet.NodeStats{Path: n.Path, Reached: n.Reached, Matched: n.Matched}
		for _, r := range n.Rules {
			ns.Rules = append(ns.Rules, fleet.RuleStats{Name: r.Name, Reached: r.Reached, Matched: r.Matched, Actions: r.Actions,
				Succeeded: r.Succeeded, Failed: r.Failed, LastMatchMS: r.LastMatchMs})
		}
		out.Nodes = append(out.Nodes, ns)
	}
	return out
}
