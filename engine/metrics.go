package engine

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/squallhq/squall/internal/metricset"
)

// Stages of squall_engine_stage_duration_seconds.
const (
	stageDecode   = "decode"
	stageEvaluate = "evaluate"
	stageAct      = "act"
	stageCommit   = "commit"
)

// Reasons of squall_engine_events_failed_total.
const (
	failDecode = "decode"
	failAction = "action"
	// failEvaluate: evaluating the event against the tree panicked.
	failEvaluate = "evaluate"
)

// Where a contained panic happened (squall_engine_panics_total).
const (
	panicEvaluate = "evaluate"
	panicAction   = "action"
	panicCompile  = "compile"
	panicHTTP     = "http"
)

// metrics are the engine's Prometheus metrics.
type metrics struct {
	*metricset.Set

	processed    prometheus.Counter
	failed       *prometheus.CounterVec
	deduplicated prometheus.Counter
	abandoned    prometheus.Counter
	dlq          prometheus.Counter
	dlqFailures  prometheus.Counter
	stage        *prometheus.HistogramVec
	decode       prometheus.Observer
	evaluate     prometheus.Observer
	act          prometheus.Observer
	commit       prometheus.Observer
	commits      prometheus.Counter
	commitFails  prometheus.Counter
	commitWaits  prometheus.Counter
	fetchErrors  prometheus.Counter
	treeIndex    prometheus.Gauge
	treeUpdates  prometheus.Counter
	compileFails prometheus.Counter
	panics       *prometheus.CounterVec
	watchErrors  prometheus.Counter
	partitions   prometheus.Gauge
	lag          *prometheus.GaugeVec
	ready        prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		processed:    metricset.Counter("squall_engine_events_processed_total", "Events evaluated whose actions all ran (events without actions included)."),
		failed:       metricset.CounterVec("squall_engine_events_failed_total", "Events sent to the dead-letter topic, by reason: decode (not an event), evaluate (evaluating it panicked) or action (an action failed past its retries, or panicked).", "reason"),
		deduplicated: metricset.Counter("squall_engine_events_deduplicated_total", "Events skipped because their squall-event-id was processed recently (redeliveries)."),
		abandoned:    metricset.Counter("squall_engine_events_abandoned_total", "Events whose processing was cut off at shutdown; they stay uncommitted and come again."),
		dlq:          metricset.Counter("squall_engine_dlq_messages_total", "Records written to the dead-letter topic."),
		dlqFailures:  metricset.Counter("squall_engine_dlq_write_failures_total", "Failed writes to the dead-letter topic (each is retried)."),
		// 1µs to ~16s.
		stage:       metricset.HistogramVec("squall_engine_stage_duration_seconds", "Duration of one event's stage (decode, evaluate, act), or of one commit (commit).", prometheus.ExponentialBuckets(1e-6, 4, 13), "stage"),
		commits:     metricset.Counter("squall_engine_commits_total", "Offset commits that succeeded."),
		commitFails: metricset.Counter("squall_engine_commit_failures_total", "Offset commits that failed (retried at the next interval)."),
		commitWaits: metricset.Counter("squall_engine_commit_waits_total",
			"Fetched batches held until a commit made room: 2 × workers × queue size events were waiting for their commit (the bound of what a crash repeats)."),
		fetchErrors:  metricset.Counter("squall_engine_fetch_errors_total", "Errors fetching from Kafka."),
		treeIndex:    metricset.Gauge("squall_engine_tree_index", "Index of the tree the engine evaluates events against (0: none yet)."),
		treeUpdates:  metricset.Counter("squall_engine_tree_updates_total", "Trees compiled and swapped in."),
		compileFails: metricset.Counter("squall_engine_tree_compile_failures_total", "Trees from the master refused because they did not decode or compile; the previous tree stays."),
		panics:       metricset.CounterVec("squall_engine_panics_total", "Panics contained to the work that raised them, by where: evaluate (one event: dead-lettered), action (one action: failed, the event dead-lettered), compile (one tree: refused, the previous one stays), http (one request: answered 500). Each is logged with its stack.", "where"),
		watchErrors:  metricset.Counter("squall_engine_watch_errors_total", "Failed tree-watch requests to the masters."),
		partitions:   metricset.Gauge("squall_engine_assigned_partitions", "Partitions assigned to this engine in the consumer group."),
		lag:          metricset.GaugeVec("squall_engine_partition_lag", "Records of an assigned partition after the last one handed to a worker (the partition's high watermark when it was fetched, minus its offset, minus 1).", "partition"),
		ready:        metricset.Gauge("squall_engine_ready", "1 when the engine has a tree and has joined the consumer group."),
	}
	m.decode = m.stage.WithLabelValues(stageDecode)
	m.evaluate = m.stage.WithLabelValues(stageEvaluate)
	m.act = m.stage.WithLabelValues(stageAct)
	m.commit = m.stage.WithLabelValues(stageCommit)
	m.failed.WithLabelValues(failDecode)
	m.failed.WithLabelValues(failAction)
	m.failed.WithLabelValues(failEvaluate)
	for _, where := range []string{panicEvaluate, panicAction, panicCompile, panicHTTP} {
		m.panics.WithLabelValues(where)
	}
	var err error
	if m.Set, err = metricset.Register(reg,
		m.processed, m.failed, m.deduplicated, m.abandoned, m.dlq, m.dlqFailures, m.stage,
		m.commits, m.commitFails, m.commitWaits, m.fetchErrors, m.treeIndex, m.treeUpdates, m.compileFails,
		m.panics, m.watchErrors, m.partitions, m.lag, m.ready,
	); err != nil {
		return nil, fmt.Errorf("register engine metrics: %w", err)
	}
	return m, nil
}
