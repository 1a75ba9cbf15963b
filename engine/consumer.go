package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/engine/action"
	"github.com/squallhq/squall/engine/deadletter"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/panics"
	"github.com/squallhq/squall/internal/sleep"
	"github.com/squallhq/squall/internal/tracing"
)

// Record headers the engine reads (the satellite writes them) and adds to
// dead-lettered records; package deadletter describes them all.
const (
	HeaderEventID = "squall-event-id"
	// HeaderError is the reason a record was dead-lettered.
	HeaderError = deadletter.HeaderError
	// HeaderErrorStage is where it failed: "decode", "evaluate" or
	// "action".
	HeaderErrorStage = deadletter.HeaderErrorStage
	// HeaderErrorActions lists the actions that failed, as
	// "index:id" separated by commas (index in the event's actions).
	HeaderErrorActions = deadletter.HeaderErrorActions
	// HeaderErrorRules lists the positions of the actions that failed
	// (rule path and action index), separated by commas.
	HeaderErrorRules = deadletter.HeaderErrorRules
	// HeaderTreeIndex is the index of the tree the event was evaluated
	// against.
	HeaderTreeIndex = deadletter.HeaderTreeIndex
	// HeaderEngine is the id of the engine (Config.Name).
	HeaderEngine = deadletter.HeaderEngine
	// HeaderDeadAt is when the record was dead-lettered (RFC 3339).
	HeaderDeadAt = deadletter.HeaderDeadAt
	// HeaderOrigin is where the record was read: topic/partition/offset.
	HeaderOrigin = deadletter.HeaderOrigin
	// HeaderOriginTime is the timestamp of the record read (RFC 3339).
	HeaderOriginTime = deadletter.HeaderOriginTime
	// HeaderReplayOf names the dead letter a replayed record came from.
	HeaderReplayOf = deadletter.HeaderReplayOf
)

// maxReasonBytes bounds the error text of a dead-lettered record.
const maxReasonBytes = 4 << 10

// job is a fetched message on its way to a worker. Workers receive them in
// chunks: one channel operation per chunk, not per event.
type job struct {
	msg *kafkasource.Message
	tk  ticket
}

// queueChunks is the capacity of a worker's queue in chunks (fewer when
// QueueSize is smaller); a chunk holds at most QueueSize/queueChunks
// events, so that at most QueueSize events wait for a worker.
const queueChunks = 4

// queueShape returns the capacity of a worker's queue in chunks and the
// size of a chunk for queueSize events.
func queueShape(queueSize int) (chunks, chunk int) {
	chunks = min(queueChunks, queueSize)
	return chunks, max(1, queueSize/chunks)
}

// crashCause is implemented by a cause of the cancellation of Run's
// context that makes it stop as a crash would: without waiting for the
// events in progress and without a last commit. Only tests define one (a
// process that crashes runs no code), to measure what a crash costs.
type crashCause interface {
	error
	crash()
}

// crashed reports whether ctx was canceled with a crashCause.
func crashed(ctx context.Context) bool {
	var c crashCause
	return errors.As(context.Cause(ctx), &c)
}

// consume waits for a tree, then consumes until ctx ends, and shuts the
// consumer down.
func (s *Service) consume(ctx context.Context) error {
	select {
	case <-s.treeReady:
	case <-ctx.Done():
		return nil
	}
	scfg := s.cfg.sourceConfig(s.base)
	scfg.OnAssignment = s.onAssignment
	src, err := kafkasource.Open(scfg)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	s.source.Store(src)
	s.log.Info("consuming", slog.String("topic", s.cfg.Topic), slog.String("group", s.cfg.Group),
		slog.Int("workers", s.cfg.Workers), slog.Uint64(logKeyTreeIndex, s.TreeIndex()))

	// Actions run under their own context: when ctx ends they finish,
	// unless the shutdown timeout passes.
	actCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	kick := make(chan struct{}, 1)
	finished := make(chan struct{}, 1)
	queues := make([]chan []job, s.cfg.Workers)
	var workers sync.WaitGroup
	for i := range queues {
		chunks, _ := queueShape(s.cfg.QueueSize)
		q := make(chan []job, chunks)
		queues[i] = q
		workers.Go(func() { s.work(actCtx, i, q, kick, finished) })
	}
	commitCtx, stopCommits := context.WithCancel(context.WithoutCancel(ctx))
	var committer sync.WaitGroup
	committer.Go(func() { s.commitLoop(commitCtx, src, kick, finished) })

	s.fetch(ctx, src, queues, kick)

	// Shutdown: no more fetching; drain the queues; commit; leave.
	s.draining.Store(true)
	s.updateReady()
	crash := crashed(ctx)
	if crash {
		abort()
	}
	for _, q := range queues {
		close(q)
	}
	drained := make(chan struct{})
	go func() {
		workers.Wait()
		close(drained)
	}()
	t := time.NewTimer(s.cfg.ShutdownTimeout)
	select {
	case <-drained:
	case <-t.C:
		s.log.Warn("shutdown timeout: canceling the actions in progress; their events stay uncommitted",
			slog.Duration("timeout", s.cfg.ShutdownTimeout), slog.Int("in_flight", s.tracker.inFlight()))
		abort()
		<-drained
	}
	t.Stop()
	stopCommits()
	committer.Wait()
	var errs []error
	if !crash {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CommitTimeout)
		if err := s.commit(cctx, src); err != nil {
			errs = append(errs, fmt.Errorf("engine: last commit: %w", err))
		}
		cancel()
	}
	if err := src.Close(); err != nil {
		errs = append(errs, fmt.Errorf("engine: %w", err))
	}
	s.log.Info("consumer stopped", slog.Bool("crash", crash))
	return errors.Join(errs...)
}

// lagGauges sets squall_engine_partition_lag from the fetch loop. It keeps
// the gauges of the current assignment's partitions, so that a message
// costs no label lookup, and sets none for a partition outside it (a
// message fetched before a rebalance took the partition away: onAssignment
// deleted its gauge). Before the first assignment is known, the gauge of
// a message's partition is set.
type lagGauges struct {
	vec    *prometheus.GaugeVec
	of     *kafkasource.Assignment
	gauges map[int]prometheus.Gauge // nil value: not assigned
}

func (l *lagGauges) set(a *kafkasource.Assignment, partition int, lag int64) {
	if a != l.of || l.gauges == nil {
		l.of, l.gauges = a, map[int]prometheus.Gauge{}
	}
	g, ok := l.gauges[partition]
	if !ok {
		// Before the first assignment is known (OnAssignment runs
		// before the generation's fetches start, but the engine reads
		// it from another goroutine), the message's partition is
		// assigned: the Source fetches only those. Without its gauge
		// then, a fetch loop held by full queues would leave the lag
		// unreported until the next batch.
		if a == nil || slices.Contains(a.Partitions, partition) {
			g = l.vec.WithLabelValues(strconv.Itoa(partition))
		}
		l.gauges[partition] = g
	}
	if g != nil {
		g.Set(float64(max(lag, 0)))
	}
}

// fetch hands the fetched messages to the workers until ctx ends, a
// batch at a time: the messages of a batch are tracked under one lock and
// go to each worker in chunks. The messages of one key always go to the
// same worker. The partition's lag gauge follows the messages handed to
// the workers: set after each chunk (from its last message, the highest
// offset of the chunk) and at the end of the batch.
func (s *Service) fetch(ctx context.Context, src *kafkasource.Source, queues []chan []job, kick chan<- struct{}) {
	lag := lagGauges{vec: s.m.lag}
	_, chunk := queueShape(s.cfg.QueueSize)
	pending := make([][]job, len(queues))
	var tickets []ticket
	for {
		b, err := src.FetchBatch(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafkasource.ErrClosed) {
				return
			}
			s.m.fetchErrors.Inc()
			s.log.Warn("fetch failed", slog.String(logKeyError, err.Error()))
			if !sleep.For(ctx, 500*time.Millisecond) {
				return
			}
			continue
		}
		if !s.waitRoom(ctx, kick) {
			return
		}
		tickets = s.tracker.addBatch(b.Partition, b.Messages, tickets[:0])
		for i := range b.Messages {
			m := &b.Messages[i]
			w := workerOf(m, len(queues))
			if pending[w] == nil {
				pending[w] = make([]job, 0, min(chunk, len(b.Messages)))
			}
			pending[w] = append(pending[w], job{msg: m, tk: tickets[i]})
			if len(pending[w]) == chunk {
				if !sendChunk(ctx, queues[w], pending[w]) {
					return
				}
				pending[w] = nil
				lag.set(s.assignment.Load(), b.Partition, b.HighWaterMark-m.Offset()-1)
			}
		}
		for w, jobs := range pending {
			if len(jobs) > 0 {
				if !sendChunk(ctx, queues[w], jobs) {
					return
				}
				pending[w] = nil
			}
		}
		last := &b.Messages[len(b.Messages)-1]
		lag.set(s.assignment.Load(), b.Partition, b.HighWaterMark-last.Offset()-1)
	}
}

// replayLimit returns how many fetched messages may wait for their commit
// (queued, in progress, or finished and not committed yet) before the
// fetch loop waits for a commit: twice what the workers' queues hold.
// An engine that dies repeats at most that many events, plus one batch
// ([kafkasource.MaxBatchMessages]): 2 × Workers × QueueSize + 256.
func (c *Config) replayLimit() int { return 2 * c.Workers * c.QueueSize }

// waitRoom waits, before a fetched batch is handed to the workers, until
// fewer than replayLimit messages wait for their commit, asking the commit
// loop for one; it reports false when ctx ended first.
func (s *Service) waitRoom(ctx context.Context, kick chan<- struct{}) bool {
	limit := s.cfg.replayLimit()
	for s.tracker.uncommitted(limit) >= limit {
		s.m.commitWaits.Inc()
		select {
		case kick <- struct{}{}:
		default:
		}
		select {
		case <-s.tracker.room:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// sendChunk puts jobs in q, waiting for room until ctx ends.
func sendChunk(ctx context.Context, q chan<- []job, jobs []job) bool {
	select {
	case q <- jobs:
		return true
	case <-ctx.Done():
		return false
	}
}

// workerOf picks the worker of a message: by a hash of its key (FNV-1a),
// or by partition for messages without a key.
func workerOf(m *kafkasource.Message, n int) int {
	key := m.Key()
	if len(key) == 0 {
		return m.Partition() % n
	}
	h := uint32(2166136261)
	for _, c := range key {
		h ^= uint32(c)
		h *= 16777619
	}
	return int(h % uint32(n))
}

// flushAfter bounds how long a worker keeps finished events waiting for
// their archive lines' write, and flushLines how many.
const (
	flushAfter = 2 * time.Millisecond
	flushLines = 256
)

// waitingJob is an event whose archive lines wait for the write batch's
// flush; ok is false for an event whose processing was cut off. tv is
// the tree it was evaluated against.
type waitingJob struct {
	j  *job
	ok bool
	tv *treeVersion
}

// work processes the jobs of queue number w, in order, counting its
// evaluations in the w-th shard of each tree's counters. It tells the
// commit loop of every finished event (finished), and kicks it once
// CommitBatch events finished since the last commit.
//
// Archive actions run under a write batch: their lines are written once
// per file when flushLines events wait for it, flushAfter after the first
// of them, or when the queue is empty, and the events whose lines wait
// count as finished only once written.
func (s *Service) work(ctx context.Context, w int, q <-chan []job, kick, finished chan<- struct{}) {
	var buf []tree.Action
	wb := &action.WriteBatch{}
	wctx := action.WithWriteBatch(ctx, wb)
	var waiting []waitingJob
	var since time.Time
	var failed []action.FailedWrite
	flush := func() {
		failed = wb.Flush(failed[:0])
		for _, f := range failed {
			wj := &waiting[f.Owner]
			if wj.ok && !s.rewrite(ctx, wj.j.msg, f, wj.tv.counters[w]) {
				s.m.abandoned.Inc()
				wj.ok = false
			}
		}
		for _, wj := range waiting {
			if wj.ok {
				s.finish(wj.j.tk, kick, finished)
			}
		}
		clear(waiting)
		waiting = waiting[:0]
	}
	for jobs := range q {
		for i := range jobs {
			j := &jobs[i]
			wb.Owner = len(waiting)
			lines := wb.Lines()
			tv := s.current.Load()
			ok := s.process(wctx, tv, w, j.msg, &buf, wb)
			if !ok {
				s.m.abandoned.Inc()
			}
			if wb.Lines() == lines { // no line of its own waits
				if ok {
					s.finish(j.tk, kick, finished)
				}
				continue
			}
			if len(waiting) == 0 {
				since = time.Now()
			}
			waiting = append(waiting, waitingJob{j: j, ok: ok, tv: tv})
			if len(waiting) >= flushLines || time.Since(since) >= flushAfter {
				flush()
			}
		}
		if len(waiting) > 0 && (len(q) == 0 || time.Since(since) >= flushAfter) {
			flush()
		}
	}
	if len(waiting) > 0 {
		flush()
	}
}

// finish records a finished event for the commit loop.
func (s *Service) finish(tk ticket, kick, finished chan<- struct{}) {
	signal := finished
	if n, now := s.tracker.done(tk); now || n >= s.cfg.CommitBatch {
		signal = kick
	}
	select {
	case signal <- struct{}{}:
	default:
	}
}

// rewrite runs again, on its own, an archive action whose line a write
// batch failed to write (with the registry's retries), and dead-letters
// the event if it fails for good. It reports whether the event is
// finished; false means ctx ended first. The action, counted as
// succeeded when it was batched, is counted in cnt as failed instead
// when it fails for good.
func (s *Service) rewrite(ctx context.Context, m *kafkasource.Message, f action.FailedWrite, cnt *tree.Counters) bool {
	err := s.actions.Run(ctx, f.Action)
	if err == nil {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	cnt.ActionRetracted(&f.Action)
	id, _ := m.Header(HeaderEventID)
	var index uint64
	if tv := s.current.Load(); tv != nil {
		index = tv.index
	}
	reason := fmt.Sprintf("action %s: %v (its batched write failed first: %v)", f.Action.ID, err, f.Err)
	if !s.deadLetter(ctx, m, id, index, failAction, reason, strconv.Itoa(f.Index)+":"+f.Action.ID, f.Action.Position) {
		return false
	}
	s.m.failed.WithLabelValues(failAction).Inc()
	return true
}

// process runs one event: deduplicate, decode, evaluate against the
// current tree, run the actions; dead-letter it if it does not decode or an
// action fails for good. It reports whether the event is finished (its
// offset may be committed); false means it was cut off by ctx.
//
// Under a write batch (wb, from ctx), archive actions leave their writes
// to the caller's flush.
//
// tv is the current tree, and w the worker's number: its shard of the
// tree's counters.
func (s *Service) process(ctx context.Context, tv *treeVersion, w int, m *kafkasource.Message, buf *[]tree.Action, wb *action.WriteBatch) bool {
	if ctx.Err() != nil {
		return false
	}
	id, _ := m.Header(HeaderEventID)
	var span trace.Span
	if s.tracer != nil {
		ctx, span = s.startSpan(ctx, m, id)
		defer span.End()
	}
	// The id's key is computed once for the lookup and the insert. A
	// replayed event is known by its id and the dead letter it replays:
	// the original (dead-lettered) is in the window under its id alone,
	// and two replays of one dead letter share their key.
	key, keyed := s.dedupe.key(dedupeID(m, id))
	if keyed && s.dedupe.seenKey(key) {
		s.m.deduplicated.Inc()
		if span != nil {
			span.SetAttributes(attribute.Bool(attrDuplicate, true))
		}
		if s.log.Enabled(ctx, slog.LevelDebug) {
			s.log.DebugContext(ctx, "duplicate event skipped", s.eventAttrs(m, id)...)
		}
		return true
	}
	cnt := tv.counters[w]
	// One clock reading, then only the monotonic one (time.Since) per stage.
	t0 := time.Now()
	ev, err := tree.DecodeEvent(m.Value())
	d1 := time.Since(t0)
	s.m.decode.Observe(d1.Seconds())
	if err != nil {
		if span != nil {
			span.SetStatus(codes.Error, "the event does not decode")
		}
		if !s.deadLetter(ctx, m, id, tv.index, failDecode, err.Error(), "", "") {
			return false
		}
		s.m.failed.WithLabelValues(failDecode).Inc()
		if keyed {
			s.dedupe.addKey(key)
		}
		return true
	}

	if ev.TraceID == nil {
		// ${event.trace_id}: the trace the intake recorded, unless the
		// event names one itself.
		if tp, ok := m.Header(HeaderTraceparent); ok {
			if id, ok := traceIDOf(tp); ok {
				ev.TraceID = id
			}
		}
	}
	actions, perr := s.evaluateContained(ctx, tv, cnt, t0.UnixMilli(), ev, (*buf)[:0])
	if perr != nil {
		s.contained(ctx, m, id, panicEvaluate, perr)
		if span != nil {
			span.SetStatus(codes.Error, "evaluating the event panicked")
		}
		if !s.deadLetter(ctx, m, id, tv.index, failEvaluate, "evaluating the event panicked: "+perr.Error(), "", "") {
			return false
		}
		s.m.failed.WithLabelValues(failEvaluate).Inc()
		if keyed {
			s.dedupe.addKey(key)
		}
		return true
	}
	if len(id) > 0 && len(actions) > 0 {
		// The executors derive their idempotency keys from it.
		eventID := string(id)
		for i := range actions {
			actions[i].EventID = eventID
		}
	}
	d2 := time.Since(t0)
	s.m.evaluate.Observe((d2 - d1).Seconds())
	var failed, positions, reasons []string
	for i, a := range actions {
		if wb != nil {
			wb.Index = i
		}
		err := s.runAction(ctx, m, id, a)
		if err != nil && ctx.Err() != nil {
			clear(actions)
			return false
		}
		cnt.ActionDone(&actions[i], err == nil)
		if err != nil {
			failed = append(failed, strconv.Itoa(i)+":"+a.ID)
			positions = append(positions, a.Position)
			reasons = append(reasons, fmt.Sprintf("action %d (%s): %v", i, a.ID, err))
		}
	}
	s.m.act.Observe((time.Since(t0) - d2).Seconds())
	n := len(actions)
	clear(actions)
	*buf = actions
	if len(failed) > 0 {
		if span != nil {
			span.SetStatus(codes.Error, "actions failed: "+strings.Join(failed, ","))
		}
		if !s.deadLetter(ctx, m, id, tv.index, failAction, strings.Join(reasons, "; "), strings.Join(failed, ","), strings.Join(positions, ",")) {
			return false
		}
		s.m.failed.WithLabelValues(failAction).Inc()
	} else {
		s.m.processed.Inc()
	}
	if keyed {
		s.dedupe.addKey(key)
	}
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.DebugContext(ctx, "event processed", append(s.eventAttrs(m, id),
			slog.Uint64(logKeyTreeIndex, tv.index), slog.Int(logKeyActions, n))...)
	}
	return true
}

// evaluateContained evaluates the event; a panic of the evaluator is
// returned, contained to this event (decision 51).
func (s *Service) evaluateContained(ctx context.Context, tv *treeVersion, cnt *tree.Counters, nowMs int64, ev *tree.Event, buf []tree.Action) (actions []tree.Action, perr *panics.Error) {
	defer func() {
		if v := recover(); v != nil {
			perr = panics.Recovered(v)
		}
	}()
	if s.tracer != nil {
		return s.evaluate(ctx, tv, cnt, nowMs, ev, buf), nil
	}
	return cnt.Actions(ev, buf, nowMs), nil
}

// runAction runs one action; a panic of its executor is a failure of this
// action alone.
func (s *Service) runAction(ctx context.Context, m *kafkasource.Message, id []byte, a tree.Action) (err error) {
	defer func() {
		if v := recover(); v != nil {
			perr := panics.Recovered(v)
			s.contained(ctx, m, id, panicAction, perr)
			err = perr
		}
	}()
	return s.actions.Run(ctx, a)
}

// contained counts and logs, with its stack, a panic contained to one event.
func (s *Service) contained(ctx context.Context, m *kafkasource.Message, id []byte, where string, perr *panics.Error) {
	s.m.panics.WithLabelValues(where).Inc()
	s.log.ErrorContext(ctx, "panic contained to one event", append(s.eventAttrs(m, id), slog.String("where", where),
		slog.String("panic", fmt.Sprint(perr.Value)), slog.String("stack", string(perr.Stack)))...)
}

// eventAttrs are the log attributes of an event. With tracing off they
// include the trace id of its traceparent header (with tracing on, the log
// handler adds the span's).
func (s *Service) eventAttrs(m *kafkasource.Message, id []byte) []any {
	attrs := []any{slog.String(logKeyEventID, string(id)), slog.Int(logKeyPartition, m.Partition()),
		slog.Int64(logKeyOffset, m.Offset())}
	if s.tracer == nil {
		if tp, ok := m.Header(HeaderTraceparent); ok {
			if tid, ok := traceIDOf(tp); ok {
				attrs = append(attrs, slog.String(tracing.LogKeyTraceID, tid))
			}
		}
	}
	return attrs
}

// dedupeID returns the id the dedupe window knows the message by: its
// event id, followed for a replayed event by the dead letter it replays.
func dedupeID(m *kafkasource.Message, id []byte) []byte {
	of, ok := m.Header(HeaderReplayOf)
	if !ok || len(id) == 0 {
		return id
	}
	k := make([]byte, 0, len(id)+1+len(of))
	return append(append(append(k, id...), '\n'), of...)
}

// deadLetter writes the message to the dead-letter topic with the reason
// in its headers (package deadletter), retrying until it is written or
// ctx ends; it reports whether it was written. actions and rules name the
// failed actions and their positions (stage action).
func (s *Service) deadLetter(ctx context.Context, m *kafkasource.Message, id []byte, index uint64, stage, reason, actions, rules string) bool {
	if len(reason) > maxReasonBytes {
		reason = reason[:maxReasonBytes] + "…"
	}
	headers := m.Headers()
	kept := headers[:0]
	for _, h := range headers {
		// An event replayed from the dead-letter topic loses its old reason.
		if !deadletter.IsReason(h.Key) {
			kept = append(kept, h)
		}
	}
	now := time.Now().UTC()
	kept = append(kept,
		kafkasource.Header{Key: HeaderError, Value: []byte(reason)},
		kafkasource.Header{Key: HeaderErrorStage, Value: []byte(stage)},
		kafkasource.Header{Key: HeaderTreeIndex, Value: strconv.AppendUint(nil, index, 10)},
		kafkasource.Header{Key: HeaderDeadAt, Value: now.AppendFormat(nil, time.RFC3339Nano)},
		kafkasource.Header{Key: HeaderOrigin, Value: fmt.Appendf(nil, "%s/%d/%d", m.Topic(), m.Partition(), m.Offset())},
	)
	if t := m.Time(); !t.IsZero() {
		kept = append(kept, kafkasource.Header{Key: HeaderOriginTime, Value: t.UTC().AppendFormat(nil, time.RFC3339Nano)})
	}
	if s.cfg.Name != "" {
		kept = append(kept, kafkasource.Header{Key: HeaderEngine, Value: []byte(s.cfg.Name)})
	}
	if actions != "" {
		kept = append(kept, kafkasource.Header{Key: HeaderErrorActions, Value: []byte(actions)})
	}
	if rules != "" {
		kept = append(kept, kafkasource.Header{Key: HeaderErrorRules, Value: []byte(rules)})
	}
	// The record's timestamp is the time it died, so that the topic's
	// retention counts from it (a replayed event keeps an old one).
	rec := kafkasource.Record{Key: m.Key(), Value: m.Value(), Headers: kept, Time: now}
	backoff := 100 * time.Millisecond
	for {
		err := s.dlq.Write(ctx, rec)
		if err == nil {
			s.m.dlq.Inc()
			s.log.WarnContext(ctx, "event dead-lettered", append(s.eventAttrs(m, id),
				slog.Uint64(logKeyTreeIndex, index), slog.String(logKeyStage, stage),
				slog.String(logKeyReason, reason))...)
			return true
		}
		s.m.dlqFailures.Inc()
		if ctx.Err() != nil {
			return false
		}
		s.log.ErrorContext(ctx, "dead-letter write failed, retrying", append(s.eventAttrs(m, id),
			slog.String(logKeyError, err.Error()), slog.Duration("delay", backoff))...)
		if !sleep.For(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// commitLoop commits the finished offsets CommitDelay after an event
// finished (the events that finish meanwhile go in the same commit; one
// commit at a time), at once when kicked (CommitBatch events finished), and
// every CommitInterval, until ctx ends. With CommitDelay 0 only the
// interval and the batch commit.
func (s *Service) commitLoop(ctx context.Context, src *kafkasource.Source, kick, finished <-chan struct{}) {
	t := time.NewTicker(s.cfg.CommitInterval)
	defer t.Stop()
	delay := time.NewTimer(time.Hour)
	delay.Stop()
	var delayed <-chan time.Time // delay.C while it runs
	for {
		select {
		case <-ctx.Done():
			return
		case <-finished:
			if s.cfg.CommitDelay > 0 && delayed == nil {
				delay.Reset(s.cfg.CommitDelay)
				delayed = delay.C
			}
			continue
		case <-delayed:
			delayed = nil
		case <-t.C:
		case <-kick:
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CommitTimeout)
		if err := s.commit(cctx, src); err != nil && ctx.Err() == nil {
			s.log.Warn("commit failed; retrying at the next interval", slog.String(logKeyError, err.Error()))
		}
		cancel()
	}
}

// commit commits the positions the tracker allows.
func (s *Service) commit(ctx context.Context, src *kafkasource.Source) error {
	ps := s.tracker.positions()
	if len(ps) == 0 {
		return nil
	}
	start := time.Now()
	err := src.Commit(ctx, ps...)
	s.m.commit.Observe(time.Since(start).Seconds())
	if err != nil {
		s.m.commitFails.Inc()
		return err
	}
	s.tracker.committed(ps)
	s.m.commits.Inc()
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("offsets committed", slog.Any(logKeyPositions, ps))
	}
	return nil
}
