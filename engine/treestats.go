package engine

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/tree"
)

// TreeStats are the counters of the tree an engine runs, summed over its
// workers: cumulative since this instance of the engine installed the
// tree. A master keeps the last TreeStats of each (Instance, TreeIndex)
// and sums them over instances: a report lost or sent twice changes
// nothing, and a restarted engine is a new instance that starts at zero.
type TreeStats struct {
	// TreeIndex identifies the tree: the master's index of its deploy.
	TreeIndex uint64
	// Instance names this run of the engine (random, made at start).
	Instance string
	// Loaded is when the engine installed the tree.
	Loaded time.Time
	tree.Stats
}

// newInstanceID returns a random id for a run of the engine.
func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Instance returns the id of this run of the engine in its tree stats.
func (s *Service) Instance() string { return s.instance }

// TreeStats returns the counters of the tree the engine runs; false
// before it has one.
func (s *Service) TreeStats() (TreeStats, bool) {
	tv := s.current.Load()
	if tv == nil || tv.tree == nil {
		return TreeStats{}, false
	}
	return TreeStats{TreeIndex: tv.index, Instance: s.instance, Loaded: tv.loaded, Stats: tv.tree.Stats(tv.counters...)}, true
}

// DefaultRulesetMetrics is how many rulesets have their own label value
// in the per-ruleset metrics by default (Config.RulesetMetrics).
const DefaultRulesetMetrics = 100

// otherRulesets is the label value of the rulesets past the budget.
const otherRulesets = "other"

// rulesetCollector serves the per-ruleset counters of the tree the engine
// runs: the first budget rulesets in tree order each with their path as
// label (names joined by "."), the rest summed as "other". They restart
// from zero when a new tree is installed, as counters do after a restart.
type rulesetCollector struct {
	budget int
	stats  func() (TreeStats, bool)

	evaluations, matches, actions *prometheus.Desc
}

func newRulesetCollector(budget int, stats func() (TreeStats, bool)) *rulesetCollector {
	return &rulesetCollector{budget: budget, stats: stats,
		evaluations: prometheus.NewDesc("squall_engine_ruleset_evaluations_total",
			"Evaluations of a ruleset by the tree the engine runs (an event reaches a ruleset once per iteration of each iterator above it); rulesets past the label budget are summed as ruleset=\"other\". Restarts at zero when a tree is installed.", []string{"ruleset"}, nil),
		matches: prometheus.NewDesc("squall_engine_ruleset_rule_matches_total",
			"Rules of a ruleset that matched, summed over its rules.", []string{"ruleset"}, nil),
		actions: prometheus.NewDesc("squall_engine_ruleset_actions_total",
			"Actions the rules of a ruleset produced that ran, by outcome: succeeded, or failed (past their retries, or panicked).", []string{"ruleset", "outcome"}, nil),
	}
}

func (c *rulesetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.evaluations
	ch <- c.matches
	ch <- c.actions
}

func (c *rulesetCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.stats()
	if !ok {
		return
	}
	type sums struct{ evaluations, matches, succeeded, failed uint64 }
	var other sums
	labelled, folded := 0, 0
	emit := func(label string, v sums) {
		ch <- prometheus.MustNewConstMetric(c.evaluations, prometheus.CounterValue, float64(v.evaluations), label)
		ch <- prometheus.MustNewConstMetric(c.matches, prometheus.CounterValue, float64(v.matches), label)
		ch <- prometheus.MustNewConstMetric(c.actions, prometheus.CounterValue, float64(v.succeeded), label, "succeeded")
		ch <- prometheus.MustNewConstMetric(c.actions, prometheus.CounterValue, float64(v.failed), label, "failed")
	}
	for _, n := range st.Nodes {
		if n.Kind != config.KindRuleset {
			continue
		}
		v := sums{evaluations: n.Reached}
		for _, r := range n.Rules {
			v.matches += r.Matched
			v.succeeded += r.Succeeded
			v.failed += r.Failed
		}
		if labelled < c.budget {
			labelled++
			emit(strings.Join(n.Path, "."), v)
			continue
		}
		folded++
		other.evaluations += v.evaluations
		other.matches += v.matches
		other.succeeded += v.succeeded
		other.failed += v.failed
	}
	if folded > 0 {
		emit(otherRulesets, other)
	}
}
