// Package heartbeat builds the fleet list's heartbeats (fleet.Report) of
// an engine and a satellite from their state: squall engine and squall
// satellite send them to the masters, squall dev reports its own parts.
package heartbeat

import (
	"slices"

	"github.com/squallhq/squall/engine"
	"github.com/squallhq/squall/master/fleet"
	"github.com/squallhq/squall/satellite"
)

// Satellite is the heartbeat of a satellite (or of squall dev's intake)
// of the given version in state st.
func Satellite(id, site, version string, st satellite.Status) fleet.Report {
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
	return fleet.Report{ID: id, Role: fleet.RoleSatellite, Site: site, Version: version, Ready: st.Ready,
		Reasons: reasons, SpoolDepth: &depth, WebhooksLoaded: &loaded}
}

// Engine is the heartbeat of engine e of the given version.
func Engine(id, site, version string, e *engine.Service) fleet.Report {
	ready, reasons, warnings := e.Readiness()
	r := fleet.Report{ID: id, Role: fleet.RoleEngine, Site: site, Version: version, Ready: ready, Reasons: reasons, Warnings: warnings}
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
		r.TreeStats = treeStats(st)
	}
	return r
}

// treeStats are the tree stats of a heartbeat: the nodes an event
// reached, with their rules, up to fleet.MaxStatsEntries.
func treeStats(st engine.TreeStats) *fleet.TreeStats {
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
