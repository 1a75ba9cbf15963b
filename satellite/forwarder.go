package satellite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/squallhq/squall/internal/tracing"
	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/satellite/kafkasink"
	"github.com/squallhq/squall/satellite/spool"
)

// producer is what the forwarder needs of Kafka.
type producer interface {
	Write(ctx context.Context, msgs ...kafkasink.Message) error
	// WriteWithinFrom writes one record and waits for its
	// acknowledgement until timeout after start, a clock reading the
	// caller just made (no context and timer per call).
	WriteWithinFrom(ctx context.Context, start time.Time, timeout time.Duration, msg kafkasink.Message) error
	Ping(ctx context.Context) error
	MaxMessageBytes() int64
}

// queue is what the forwarder needs of the spool.
type queue interface {
	Append(ctx context.Context, payload []byte) error
	Read(ctx context.Context, maxRecords, maxBytes int) ([]spool.Entry, error)
	Commit(ctx context.Context, entries []spool.Entry) error
	Quarantine(ctx context.Context, payload []byte) error
	Stats() spool.Stats
	Notify() <-chan struct{}
}

var (
	_ producer    = (*kafkasink.Sink)(nil)
	_ queue       = (*spool.Spool)(nil)
	_ intake.Sink = (*forwarder)(nil)
)

// drainBatch is the most records sent to Kafka in one write from the spool.
const drainBatch = 500

// forwarderConfig is the part of Config the forwarder uses.
type forwarderConfig struct {
	ackTimeout     time.Duration
	drainTimeout   time.Duration
	backoffMin     time.Duration
	backoffMax     time.Duration
	healthInterval time.Duration
	// topic names the Kafka topic in the spans.
	topic string
}

// forwarder takes accepted events to Kafka, or to the spool when Kafka does
// not acknowledge them in time, and sends the spool to Kafka in order once
// Kafka is back.
//
// It is in one of two modes. Direct: an event is written to Kafka and the
// call answered on the acknowledgement; a failure spools the event and
// switches to spooling. Spooling: every event is appended to the spool, so
// that no event overtakes the spooled ones, and the drain loop sends the
// spool to Kafka; once the spool is empty it switches back to direct.
type forwarder struct {
	cfg    forwarderConfig
	logger *slog.Logger
	m      *metrics
	kafka  producer
	spool  queue
	tracer trace.Tracer // nil: tracing off
	// sendSpan is the name of the send spans: "send <topic>".
	sendSpan string

	// mu orders the switch back to direct mode after appends: Publish
	// holds it for reading while it spools, the drain loop for writing
	// when it finds the spool empty.
	mu       sync.RWMutex
	spooling atomic.Bool

	healthMu  sync.Mutex
	health    Health
	isUp      atomic.Bool  // health.Known && health.Up, read without healthMu
	lastWrite atomic.Int64 // unix nanoseconds of the last acknowledged write
}

// Health describes the reachability of Kafka as the satellite last saw it.
type Health struct {
	// Known is false until the first write or check.
	Known bool `json:"known"`
	// Up reports whether the last write or check succeeded.
	Up bool `json:"up"`
	// Since is when Up last changed.
	Since time.Time `json:"since"`
	// Error is the last failure while down.
	Error string `json:"error,omitempty"`
}

func newForwarder(cfg forwarderConfig, kafka producer, q queue, logger *slog.Logger, m *metrics, tp trace.TracerProvider) *forwarder {
	return &forwarder{cfg: cfg, logger: logger.With("component", "forwarder"), m: m, kafka: kafka, spool: q,
		tracer: tracing.Tracer(tp, "satellite"), sendSpan: "send " + cfg.topic}
}

// Publish implements intake.Sink. With tracing on, it records a producer
// span that ends once the event is acknowledged by Kafka or spooled, and
// the event's traceparent header names that span: the engine's processing
// of the event is its child.
func (f *forwarder) Publish(ctx context.Context, rec intake.Record) error {
	msg := toMessage(rec)
	if f.tracer == nil {
		return f.publish(ctx, rec.Handed, msg)
	}
	ctx, span := f.tracer.Start(ctx, f.sendSpan, trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String(attrMessagingSystem, "kafka"), attribute.String(attrDestination, f.cfg.topic),
			attribute.String(attrOperationType, "send"), attribute.String(attrEventID, rec.EventID))
	}
	setTraceparent(&msg, span.SpanContext())
	err := f.publish(ctx, rec.Handed, msg)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "event not taken")
	}
	return err
}

// publish takes msg to Kafka or to the spool. handed is when it was
// handed over (a zero time: now); the ack timeout counts from it.
func (f *forwarder) publish(ctx context.Context, handed time.Time, msg kafkasink.Message) error {
	if handed.IsZero() {
		handed = time.Now()
	}
	if size := msg.Size(); size > f.kafka.MaxMessageBytes() {
		return fmt.Errorf("%w: %d bytes, limit %d", intake.ErrTooLarge, size, f.kafka.MaxMessageBytes())
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			handed = time.Now() // after the wait for the spool's drain
		}
		failed := false
		if !f.spooling.Load() {
			err := f.kafka.WriteWithinFrom(ctx, handed, f.cfg.ackTimeout, msg)
			if err == nil {
				// The hand-over's time, not the acknowledgement's:
				// the health check waits from it, a few
				// milliseconds earlier, and no clock is read per
				// event here.
				f.upAt(handed)
				f.m.toKafka.Inc()
				if f.tracer != nil {
					setPath(ctx, pathKafka)
				}
				return nil
			}
			if errors.Is(err, kafkasink.ErrRejected) {
				return fmt.Errorf("%w: %w", intake.ErrTooLarge, err)
			}
			f.down(err)
			failed = true
		}
		if done, err := f.enqueue(ctx, msg, failed); done {
			return err
		}
	}
}

// enqueue appends msg to the spool, switching to spooling when failed (the
// direct write failed). It reports false, without appending, when the mode
// switched to direct while it waited for the drain to finish: the event then
// goes to Kafka directly.
func (f *forwarder) enqueue(ctx context.Context, msg kafkasink.Message, failed bool) (bool, error) {
	payload := encodeRecord(msg)
	f.mu.RLock()
	defer f.mu.RUnlock()
	if failed {
		if !f.spooling.Swap(true) {
			f.m.spooling.Set(1)
			f.logger.Warn("Kafka did not acknowledge an event in time; spooling events")
		}
	} else if !f.spooling.Load() {
		return false, nil
	}
	var span trace.Span
	if f.tracer != nil {
		setPath(ctx, pathSpool)
		ctx, span = f.tracer.Start(ctx, "spool append")
		defer span.End()
	}
	err := f.spool.Append(ctx, payload)
	if err != nil && span != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "not spooled")
	}
	switch {
	case err == nil:
		f.m.forwarded.WithLabelValues(pathSpool).Inc()
		return true, nil
	case errors.Is(err, spool.ErrFull), errors.Is(err, spool.ErrTooLarge):
		return true, fmt.Errorf("%w: %w", intake.ErrSpoolFull, err)
	case errors.Is(err, spool.ErrClosed):
		return true, fmt.Errorf("%w: %w", intake.ErrClosed, err)
	}
	return true, fmt.Errorf("spool event: %w", err)
}

// resume starts in spooling mode if the spool holds events from an earlier
// run: they go first.
func (f *forwarder) resume() {
	if n := f.spool.Stats().Records; n > 0 {
		f.spooling.Store(true)
		f.m.spooling.Set(1)
		f.logger.Info("spool holds events from an earlier run; sending them first", "events", n)
	}
}

// run sends the spool to Kafka until ctx ends, and checks Kafka's health
// when idle.
func (f *forwarder) run(ctx context.Context) {
	f.probe(ctx)
	health := time.NewTicker(f.cfg.healthInterval)
	defer health.Stop()
	backoff := f.cfg.backoffMin
	wait := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(2*backoff, f.cfg.backoffMax)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	var batch []spool.Entry
	for ctx.Err() == nil {
		if len(batch) == 0 {
			var err error
			batch, err = f.spool.Read(ctx, drainBatch, int(f.kafka.MaxMessageBytes()))
			if err != nil {
				if ctx.Err() == nil {
					f.logger.Error("read spool", "error", err)
				}
				if !wait() {
					return
				}
				continue
			}
		}
		if f.spooling.Load() && len(batch) < drainBatch && (len(batch) == 0 || f.Health().Up) {
			// The tail of the spool: under steady load it never
			// empties by itself, so hold appends back for one last
			// write and switch to direct mode.
			batch = nil
			switched, err := f.finish(ctx)
			if err != nil && ctx.Err() == nil {
				f.down(err)
			}
			if !switched && !wait() {
				return
			}
			continue
		}
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-f.spool.Notify():
			case <-health.C:
				if time.Since(time.Unix(0, f.lastWrite.Load())) >= f.cfg.healthInterval {
					f.probe(ctx)
				}
			}
			continue
		}
		if h := f.Health(); h.Known && !h.Up {
			// Ask before sending: a write to a broker that does not
			// answer only times out, and may still land later, twice.
			if !f.probe(ctx) {
				if !wait() {
					return
				}
				continue
			}
		}
		n, err := f.deliver(ctx, batch, f.cfg.drainTimeout)
		batch = batch[n:]
		if err != nil {
			if ctx.Err() == nil {
				f.down(err)
			}
			if !wait() {
				return
			}
			continue
		}
		backoff = f.cfg.backoffMin
	}
}

// finish delivers what is left in the spool while no event can be appended,
// and then switches to direct mode. New calls wait meanwhile, for at most one
// write of AckTimeout per batch left. It reports whether it switched.
func (f *forwarder) finish(ctx context.Context) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		batch, err := f.spool.Read(ctx, drainBatch, int(f.kafka.MaxMessageBytes()))
		if err != nil {
			return false, fmt.Errorf("read spool: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		if _, err := f.deliver(ctx, batch, f.cfg.ackTimeout); err != nil {
			return false, err
		}
	}
	if n := f.spool.Stats().Records; n > 0 {
		// Counted but not readable: only a spool whose last append
		// failed is in that state. Kafka is not to blame.
		f.logger.Error("the spool holds records it cannot read after a failed write", "records", n)
		return false, nil
	}
	f.spooling.Store(false)
	f.m.spooling.Set(0)
	f.logger.Info("spool drained; writing events to Kafka directly")
	return true, nil
}

// deliver writes the batch to Kafka and commits what was written. A record
// Kafka can never take goes to the spool's rejected.log. It returns how many
// entries were committed.
func (f *forwarder) deliver(ctx context.Context, batch []spool.Entry, timeout time.Duration) (int, error) {
	msgs := make([]kafkasink.Message, 0, len(batch))
	for i, e := range batch {
		m, err := decodeRecord(e.Payload)
		if err == nil {
			msgs = append(msgs, m)
			continue
		}
		// Only a bug or damage that passed the CRC gets here. Entries
		// are committed in order: first those before this one.
		if i > 0 {
			batch = batch[:i]
			break
		}
		if err := f.reject(ctx, e, err); err != nil {
			return 0, err
		}
		return 1, nil
	}
	if f.tracer != nil {
		var span trace.Span
		ctx, span = f.startDrainSpan(ctx, msgs)
		defer span.End()
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	err := f.kafka.Write(wctx, msgs...)
	cancel()
	if err == nil {
		f.up()
		if err := f.spool.Commit(ctx, batch); err != nil {
			return 0, fmt.Errorf("commit spool: %w", err)
		}
		f.m.drained.Add(float64(len(batch)))
		return len(batch), nil
	}
	if !errors.Is(err, kafkasink.ErrRejected) {
		return 0, err
	}
	// Some record was refused: send them one by one to find it.
	for i := range batch {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		err := f.kafka.Write(wctx, msgs[i])
		cancel()
		switch {
		case err == nil:
			if err := f.spool.Commit(ctx, batch[i:i+1]); err != nil {
				return i, fmt.Errorf("commit spool: %w", err)
			}
			f.m.drained.Inc()
		case errors.Is(err, kafkasink.ErrRejected):
			if err := f.reject(ctx, batch[i], err); err != nil {
				return i, err
			}
		default:
			return i, err
		}
	}
	return len(batch), nil
}

// reject moves an entry Kafka can never take to rejected.log and commits it.
func (f *forwarder) reject(ctx context.Context, e spool.Entry, cause error) error {
	if err := f.spool.Quarantine(ctx, e.Payload); err != nil {
		return err
	}
	if err := f.spool.Commit(ctx, []spool.Entry{e}); err != nil {
		return fmt.Errorf("commit spool: %w", err)
	}
	f.logger.Error("Kafka refuses a spooled event; moved to the spool's rejected.log", "error", cause)
	return nil
}

// probe checks that a broker answers and records the result.
func (f *forwarder) probe(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(ctx, f.cfg.ackTimeout)
	defer cancel()
	if err := f.kafka.Ping(pctx); err != nil {
		if ctx.Err() == nil {
			f.down(err)
		}
		return false
	}
	f.up()
	return true
}

// up records a successful write or check.
func (f *forwarder) up() { f.upAt(time.Now()) }

// upAt records a successful write or check at now.
func (f *forwarder) upAt(now time.Time) {
	f.lastWrite.Store(now.UnixNano())
	if f.isUp.Load() {
		return // every acknowledged event comes here: no lock
	}
	f.healthMu.Lock()
	defer f.healthMu.Unlock()
	if f.health.Known && f.health.Up {
		return
	}
	if f.health.Known {
		f.logger.Info("Kafka is reachable again", "down_for", now.Sub(f.health.Since).Round(time.Millisecond))
	}
	f.health = Health{Known: true, Up: true, Since: now}
	f.isUp.Store(true)
	f.m.kafkaUp.Set(1)
}

// down records a failed write or check.
func (f *forwarder) down(err error) {
	f.healthMu.Lock()
	defer f.healthMu.Unlock()
	if !f.health.Known || f.health.Up {
		f.logger.Warn("Kafka is unreachable", "error", err)
		f.health = Health{Known: true, Since: time.Now()}
		f.isUp.Store(false)
		f.m.kafkaUp.Set(0)
	}
	f.health.Error = err.Error()
}

// Health returns the last known health of Kafka.
func (f *forwarder) Health() Health {
	f.healthMu.Lock()
	defer f.healthMu.Unlock()
	return f.health
}

// mode names the current mode.
func (f *forwarder) mode() string {
	if f.spooling.Load() {
		return "spooling"
	}
	return "direct"
}
