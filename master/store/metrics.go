package store

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// metrics are the store's Prometheus metrics.
type metrics struct {
	*metricset.Set

	applyDuration *prometheus.HistogramVec
	// The stages of a write, for finding where its time goes
	// (docs/BENCHMARKS.md, "Findings").
	logAppend        prometheus.Histogram
	fsmApply         prometheus.Histogram
	findingBatchWait prometheus.Histogram
	findingBatchSize prometheus.Histogram
	// findingBatchAfterAnswer and findingBatches split the batch wait
	// (docs/BENCHMARKS.md, "Findings").
	findingBatchAfterAnswer prometheus.Histogram
	findingBatches          *prometheus.CounterVec
	fsmCommands             *prometheus.CounterVec
	fsmRestores             prometheus.Counter
	stateIndex              prometheus.Gauge
	activeIndex             prometheus.Gauge
	raft                    *raftCollector
}

// newMetrics builds the metrics and registers them with reg; a nil reg
// registers nothing.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		// 250µs to ~4s.
		applyDuration: metricset.HistogramVec("squall_store_apply_duration_seconds", "Time from submitting a command on the leader until it is committed and applied.", prometheus.ExponentialBuckets(0.00025, 2, 15), "command"),
		// 50µs to ~1.6s.
		logAppend:               metricset.Histogram("squall_store_raft_log_append_seconds", "Time of each write of entries to this node's raft log, its fsync included (on the leader before it replicates them, on a follower before it answers).", prometheus.ExponentialBuckets(0.00005, 2, 16)),
		fsmApply:                metricset.Histogram("squall_store_fsm_apply_seconds", "Time of each state-file transaction applying committed entries on this node.", prometheus.ExponentialBuckets(0.00005, 2, 16)),
		findingBatchWait:        metricset.Histogram("squall_store_finding_batch_wait_seconds", "Time from the first insert of a group-commit batch of findings until the batch is submitted to raft (leader).", prometheus.ExponentialBuckets(0.00005, 2, 16)),
		findingBatchSize:        metricset.Histogram("squall_store_finding_batch_size", "Findings per group-commit batch submitted to raft (leader).", prometheus.ExponentialBuckets(1, 2, 7)),
		findingBatchAfterAnswer: metricset.Histogram("squall_store_finding_batch_after_answer_seconds", "The part of a group-commit batch's wait (squall_store_finding_batch_wait_seconds) after the answer of the batch before it, when no other batch was in raft: the wait for the answered callers to come back; all of its wait when it opened after that answer (leader).", prometheus.ExponentialBuckets(0.00005, 2, 16)),
		findingBatches:          metricset.CounterVec("squall_store_finding_batches_total", "Group-commit batches of findings submitted to raft, by what closed them: full, clocked (as many inserts came after the last batch's answer as it held), window (its window ended), grace (late, half a window after the answer), alone (an insert while they come one at a time) (leader).", "close"),
		fsmCommands:             metricset.CounterVec("squall_store_fsm_commands_total", "Commands applied by the state machine, by command type and outcome (ok or refused; command session, result replayed: a request applied before).", "command", "result"),
		fsmRestores:             metricset.Counter("squall_store_fsm_restores_total", "Snapshots restored into the state machine."),
		stateIndex:              metricset.Gauge("squall_store_state_index", "Raft log index of the last change of the replicated state."),
		activeIndex:             metricset.Gauge("squall_store_active_index", "Raft log index of the last change of the active tree."),
		raft:                    newRaftCollector(),
	}
	// Every close reason is exported at 0 from the start, so that rate()
	// and increase() see a reason's first batch.
	for _, c := range []string{closeAlone, closeFull, closeClocked, closeWindow, closeGrace} {
		m.findingBatches.WithLabelValues(c)
	}
	var err error
	if m.Set, err = metricset.Register(reg, m.applyDuration, m.logAppend, m.fsmApply, m.findingBatchWait, m.findingBatchSize, m.findingBatchAfterAnswer, m.findingBatches, m.fsmCommands, m.fsmRestores, m.stateIndex, m.activeIndex, m.raft); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return m, nil
}

// raftCollector reports raft's state when scraped.
type raftCollector struct {
	raft atomic.Pointer[raft.Raft]
	// store is the open store, for the cluster's feature level.
	store atomic.Pointer[Store]

	leader, hasLeader, term, commitIndex, appliedIndex, lastLogIndex, snapshotIndex, voters, featureLevel *prometheus.Desc
}

var _ prometheus.Collector = (*raftCollector)(nil)

func newRaftCollector() *raftCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("squall_store_raft_"+name, help, nil, nil)
	}
	return &raftCollector{
		leader:        d("leader", "1 if this node is the raft leader, else 0."),
		hasLeader:     d("has_leader", "1 if this node knows a leader, else 0."),
		term:          d("term", "Current raft term."),
		commitIndex:   d("commit_index", "Raft commit index."),
		appliedIndex:  d("applied_index", "Index of the last log entry handed to the state machine."),
		lastLogIndex:  d("last_log_index", "Index of the last entry in the raft log or snapshot."),
		snapshotIndex: d("last_snapshot_index", "Index of the last raft snapshot."),
		voters:        d("voters", "Number of voting members in the latest configuration."),
		featureLevel: prometheus.NewDesc("squall_store_cluster_feature_level",
			"Level of log entry forms the cluster's leader may write: the lowest level its members advertise (1: request ids and binary finding entries).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.hasLeader, c.term, c.commitIndex, c.appliedIndex, c.lastLogIndex, c.snapshotIndex, c.voters, c.featureLevel} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It reports nothing before Open.
func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.raft.Load()
	if r == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	boolean := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	addr, _ := r.LeaderWithID()
	gauge(c.leader, boolean(r.State() == raft.Leader))
	gauge(c.hasLeader, boolean(addr != ""))
	gauge(c.term, float64(r.CurrentTerm()))
	gauge(c.commitIndex, float64(r.CommitIndex()))
	gauge(c.appliedIndex, float64(r.AppliedIndex()))
	gauge(c.lastLogIndex, float64(r.LastIndex()))
	gauge(c.snapshotIndex, float64(statUint(r.Stats(), "last_snapshot_index")))
	if s := c.store.Load(); s != nil {
		gauge(c.featureLevel, float64(s.ClusterFeatureLevel()))
	}
	if f := r.GetConfiguration(); f.Error() == nil {
		n := 0
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				n++
			}
		}
		gauge(c.voters, float64(n))
	} else if !errors.Is(f.Error(), raft.ErrRaftShutdown) {
		ch <- prometheus.NewInvalidMetric(c.voters, f.Error())
	}
}

// statUint returns a numeric entry of raft.Stats, or 0.
func statUint(stats map[string]string, key string) uint64 {
	v, _ := strconv.ParseUint(stats[key], 10, 64)
	return v
}

// timedLogs is a raft log store that observes the time of each write in
// the squall_store_raft_log_append_seconds histogram. It hides no
// optional interface raft looks for: raft-boltdb's store implements none
// (MonotonicLogStore), and the LogCache in front of it asks the store it
// wraps.
type timedLogs struct {
	raft.LogStore
	append prometheus.Histogram
}

// StoreLog implements raft.LogStore.
func (t timedLogs) StoreLog(l *raft.Log) error { return t.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore.
func (t timedLogs) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := t.LogStore.StoreLogs(logs)
	t.append.Observe(time.Since(start).Seconds())
	return err
}
