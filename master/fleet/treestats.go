package fleet

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// TreeStats are an engine's counters of the tree it runs, as its heartbeat
// carries them: cumulative since this instance of the engine (a run, with
// its own random id) installed the tree, the deploy at TreeIndex. The
// masters keep the last TreeStats of each (instance, tree index) and sum
// them over instances (master/treestats): a heartbeat lost or sent twice
// changes nothing, an engine restarted is a new instance that starts at
// zero, and a deploy starts fresh.
//
// Only the nodes an event reached are sent, in tree order, with their
// rules, at most MaxStatsEntries nodes and rules in all; past it the
// engine stops and sets Truncated.
type TreeStats struct {
	TreeIndex uint64 `json:"tree_index"`
	Instance  string `json:"instance"`
	// LoadedMS is when the engine installed the tree (epoch ms).
	LoadedMS int64 `json:"loaded_ms"`
	// Events is the number of events evaluated.
	Events    uint64      `json:"events"`
	Nodes     []NodeStats `json:"nodes"`
	Truncated bool        `json:"truncated,omitempty"`
}

// NodeStats are the counts of one node (see engine/tree.NodeStats).
type NodeStats struct {
	Path    []string    `json:"path"`
	Reached uint64      `json:"reached"`
	Matched uint64      `json:"matched"`
	Rules   []RuleStats `json:"rules,omitempty"`
}

// RuleStats are the counts of one rule (see engine/tree.RuleStats): an
// engine's in its heartbeat, and the sums of the engines' in the tree
// stats API's answer (master/treestats).
type RuleStats struct {
	Name        string `json:"name"`
	Reached     uint64 `json:"reached"`
	Matched     uint64 `json:"matched"`
	Actions     uint64 `json:"actions"`
	Succeeded   uint64 `json:"succeeded"`
	Failed      uint64 `json:"failed"`
	LastMatchMS int64  `json:"last_match_ms"`
}

// MaxStatsEntries bounds the nodes and rules of a heartbeat's tree stats
// (with maxBody: about 120 bytes each as JSON).
const MaxStatsEntries = 10_000

// maxPathDepth bounds a node path of the tree stats.
const maxPathDepth = 256

var (
	statsNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_]+$`)
	instancePattern  = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
)

// Validate checks the stats' bounds and names.
func (s *TreeStats) Validate() error {
	if !instancePattern.MatchString(s.Instance) {
		return errors.New("instance: want 1 to 64 letters, digits, '.', '_', ':' or '-'")
	}
	if s.TreeIndex == 0 {
		return errors.New("tree_index: want the index of a deploy")
	}
	entries := 0
	for i, n := range s.Nodes {
		entries += 1 + len(n.Rules)
		if entries > MaxStatsEntries {
			return fmt.Errorf("more than %d nodes and rules", MaxStatsEntries)
		}
		if len(n.Path) == 0 || len(n.Path) > maxPathDepth {
			return fmt.Errorf("nodes[%d]: a path of 1 to %d names", i, maxPathDepth)
		}
		for _, name := range n.Path {
			if !statsNamePattern.MatchString(name) || len(name) > maxText {
				return fmt.Errorf("nodes[%d]: %q is not a node name", i, name)
			}
		}
		for _, r := range n.Rules {
			if !statsNamePattern.MatchString(r.Name) || len(r.Name) > maxText {
				return fmt.Errorf("nodes[%d]: %q is not a rule name", i, r.Name)
			}
		}
	}
	return nil
}

// StatsSink takes the tree stats of the heartbeats (master/treestats).
type StatsSink interface {
	AddTreeStats(member string, st *TreeStats, now time.Time)
}

// eventRate is what the list keeps of an engine's tree stats to show its
// events per second: the events counted at the last heartbeat.
type eventRate struct {
	tree     uint64
	instance string
	events   uint64
	at       time.Time
	perSec   *float64
}

// next returns the rate after a heartbeat with st at now: the events
// since the previous heartbeat of the same instance and tree, per second;
// unknown (nil) at the first one.
func (e eventRate) next(st *TreeStats, now time.Time) eventRate {
	n := eventRate{tree: st.TreeIndex, instance: st.Instance, events: st.Events, at: now}
	if e.instance == st.Instance && e.tree == st.TreeIndex && st.Events >= e.events {
		if d := now.Sub(e.at).Seconds(); d > 0 {
			v := float64(st.Events-e.events) / d
			n.perSec = &v
		}
	}
	return n
}
