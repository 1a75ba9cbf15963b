package backtest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/squallhq/squall/config"
	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/engine/tree"
	"github.com/squallhq/squall/internal/fielderr"
)

// Defaults and limits of a [Spec].
const (
	// DefaultMaxEvents bounds the events of a backtest when the spec
	// sets no bound.
	DefaultMaxEvents = 1_000_000
	// DefaultSample is the number of differing events kept by default.
	DefaultSample = 20
	// MaxSample is the largest sample a spec may ask for.
	MaxSample = 1000
	// MaxSampleEventBytes is the largest event a sample keeps whole; a
	// larger one is kept without its body (EventBytes says its size).
	MaxSampleEventBytes = 64 << 10
	// chunkEvents and chunkBytes bound one read of a partition.
	chunkEvents = 500
	chunkBytes  = 4 << 20
)

// Reader reads a topic's partitions by offset outside any consumer group.
// *kafkasource.Reader is one.
type Reader interface {
	Partitions(ctx context.Context, topic string) ([]kafkasource.PartitionRange, error)
	OffsetAt(ctx context.Context, topic string, part int, t time.Time) (int64, error)
	Read(ctx context.Context, topic string, part int, from, end int64, maxBytes int, fn func(*kafkasource.Message) bool) (int64, error)
}

var _ Reader = (*kafkasource.Reader)(nil)

// Spec says what a backtest compares, over which records, within which
// bounds.
type Spec struct {
	// Active is the tree in use; Candidate the tree to try (a draft).
	// Both are the top nodes of whole trees (the root filter). Required.
	Active, Candidate *config.Node
	// Topic is the events topic. Required.
	Topic string
	// Range selects the records of each partition. Required.
	Range Range
	// MaxEvents bounds the events read (default [DefaultMaxEvents]).
	MaxEvents int64
	// Sample is how many differing events the result keeps, at most
	// [MaxSample] (0: [DefaultSample]; negative: none).
	Sample int
	// Rate bounds the events evaluated per second (0: no bound).
	Rate float64
	// CPU bounds the CPU time of the backtest to this share of one core
	// (0 < CPU < 1; 0 or 1: no bound but the one core its one goroutine
	// uses). The thread that runs it is measured (cpu.go); the garbage
	// collector's own workers are not.
	CPU float64
	// Hold, when set, is called before each chunk is read: it returns
	// nil once the backtest may go on, or ctx's error. An engine holds
	// its backtests while its live pipeline lags (the worker's lag
	// guard); Progress says Held meanwhile.
	Hold func(ctx context.Context) error
}

// Range selects records of each partition of the topic: the Last records
// of each, or those whose timestamps fall in [Since, Until). Exactly one
// of Last and Since is set.
type Range struct {
	// Last is the number of records to read at the end of each partition.
	Last int64
	// Since is the time of the first record to read.
	Since time.Time
	// Until is the time before which reading stops (zero: the end of each
	// partition when the backtest starts).
	Until time.Time
}

// validate checks the spec, with its defaults set.
func (s *Spec) validate() error {
	var l fielderr.List
	if s.Active == nil {
		l.Addf("active", "no tree")
	}
	if s.Candidate == nil {
		l.Addf("candidate", "no tree")
	}
	if s.Topic == "" {
		l.Addf("topic", "required")
	}
	r := s.Range
	switch {
	case r.Last < 0:
		l.Addf("range.last", "%d is negative", r.Last)
	case r.Last > 0 && (!r.Since.IsZero() || !r.Until.IsZero()):
		l.Addf("range", "last and since/until exclude each other")
	case r.Last == 0 && r.Since.IsZero():
		l.Addf("range", "give last (records per partition) or since (a time)")
	case !r.Until.IsZero() && !r.Until.After(r.Since):
		l.Addf("range.until", "%s is not after since %s", r.Until.Format(time.RFC3339), r.Since.Format(time.RFC3339))
	}
	if s.MaxEvents < 0 {
		l.Addf("max_events", "%d is negative", s.MaxEvents)
	}
	if s.Sample > MaxSample {
		l.Addf("sample", "%d is over %d", s.Sample, MaxSample)
	}
	if s.Rate < 0 {
		l.Addf("rate", "%g is negative", s.Rate)
	}
	if s.CPU < 0 || s.CPU > 1 {
		l.Addf("cpu", "%g is not a share of one core (0 to 1)", s.CPU)
	}
	return l.Err()
}

// Backtest is one run of a [Spec]. Its methods are safe for concurrent
// use; Run runs once.
type Backtest struct {
	spec      Spec
	reader    Reader
	sides     [2]*side
	rules     *table
	rulesets  *table
	ran       atomic.Bool
	held      atomic.Bool
	read      atomic.Int64
	total     atomic.Int64
	startedNs atomic.Int64
	now       func() time.Time
}

// New validates spec, compiles both trees and returns a backtest reading
// with r. It starts nothing.
func New(r Reader, spec Spec) (*Backtest, error) {
	if spec.MaxEvents == 0 {
		spec.MaxEvents = DefaultMaxEvents
	}
	if spec.Sample == 0 {
		spec.Sample = DefaultSample
	}
	spec.Sample = max(spec.Sample, 0)
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("backtest: %w", err)
	}
	b := &Backtest{spec: spec, reader: r, rules: newTable(), rulesets: newTable(), now: time.Now}
	for i, root := range []*config.Node{spec.Active, spec.Candidate} {
		t, err := tree.Compile(root)
		if err != nil {
			return nil, fmt.Errorf("backtest: %s tree: %w", sideNames[i], err)
		}
		b.sides[i] = &side{tree: t, top: newShape(root, nil, b.rules, b.rulesets, i)}
	}
	return b, nil
}

// sideNames name the trees in errors and results.
var sideNames = [2]string{"active", "candidate"}

// Progress is how far a running backtest is.
type Progress struct {
	// Read is the number of events read so far.
	Read int64 `json:"read"`
	// Total is the number of events of the range to read (0 until the
	// range is resolved).
	Total int64 `json:"total"`
	// Elapsed is the time since the backtest started.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Rate is the events read per second since the start.
	Rate float64 `json:"rate"`
	// Held: the backtest waits for Spec.Hold.
	Held bool `json:"held,omitempty"`
}

// Progress returns how far the backtest is.
func (b *Backtest) Progress() Progress {
	p := Progress{Read: b.read.Load(), Total: b.total.Load(), Held: b.held.Load()}
	if ns := b.startedNs.Load(); ns != 0 {
		p.Elapsed = b.now().Sub(time.Unix(0, ns))
		if p.Elapsed > 0 {
			p.Rate = float64(p.Read) / p.Elapsed.Seconds()
		}
	}
	return p
}

// ErrRan is returned by a second call of Run.
var ErrRan = errors.New("backtest: already run")

// partRange is what remains to read of a partition.
type partRange struct {
	partition int
	next, end int64
}

// Run reads the range and evaluates every event with both trees. When ctx
// ends it returns the counts so far (Complete false) with ctx's error;
// when reading fails, with that error.
func (b *Backtest) Run(ctx context.Context) (*Result, error) {
	if b.ran.Swap(true) {
		return nil, ErrRan
	}
	start := b.now()
	b.startedNs.Store(start.UnixNano())
	res := &Result{Topic: b.spec.Topic, Started: start}
	c := newCounter(b)
	parts, err := b.resolve(ctx, res)
	if err == nil {
		err = b.readAll(ctx, parts, c)
	}
	c.fill(res)
	res.Finished = b.now()
	res.Elapsed = res.Finished.Sub(start)
	if res.Elapsed > 0 {
		res.Rate = float64(res.Events) / res.Elapsed.Seconds()
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// Cancelled: the failed read is its consequence.
			err = ctxErr
		}
		return res, fmt.Errorf("backtest: %w", err)
	}
	res.Complete = true
	return res, nil
}

// resolve turns the range into offsets of each partition, cut to the
// bound, and records them in res.
func (b *Backtest) resolve(ctx context.Context, res *Result) ([]partRange, error) {
	ranges, err := b.reader.Partitions(ctx, b.spec.Topic)
	if err != nil {
		return nil, err
	}
	r := b.spec.Range
	parts := make([]partRange, 0, len(ranges))
	var total int64
	for _, pr := range ranges {
		p := partRange{partition: pr.Partition, next: pr.First, end: pr.End}
		if r.Last > 0 {
			p.next = max(pr.First, pr.End-r.Last)
		} else {
			if p.next, err = b.reader.OffsetAt(ctx, b.spec.Topic, pr.Partition, r.Since); err != nil {
				return nil, err
			}
			if !r.Until.IsZero() {
				if p.end, err = b.reader.OffsetAt(ctx, b.spec.Topic, pr.Partition, r.Until); err != nil {
					return nil, err
				}
			}
			p.next = max(p.next, pr.First)
			p.end = max(p.end, p.next)
		}
		total += p.end - p.next
		parts = append(parts, p)
	}
	res.RangeEvents = total
	if total > b.spec.MaxEvents {
		// Each partition keeps its latest records, in proportion to its
		// share of the range.
		res.Truncated = true
		kept := int64(0)
		for i := range parts {
			p := &parts[i]
			n := int64(float64(p.end-p.next) * float64(b.spec.MaxEvents) / float64(total))
			p.next = p.end - n
			kept += n
		}
		total = kept
	}
	for _, p := range parts {
		res.Partitions = append(res.Partitions, PartitionRange{Partition: p.partition, From: p.next, To: p.end})
	}
	b.total.Store(total)
	return parts, nil
}

// readAll reads the partitions in turn, a chunk of each at a time, and
// evaluates each chunk's events.
func (b *Backtest) readAll(ctx context.Context, parts []partRange, c *counter) error {
	var lim *rate.Limiter
	if b.spec.Rate > 0 {
		// A burst of 10 ms of events: exact over a second, without a
		// timer per event at high rates.
		lim = rate.NewLimiter(rate.Limit(b.spec.Rate), max(1, int(b.spec.Rate/100)))
	}
	var budget *cpuBudget
	if b.spec.CPU > 0 && b.spec.CPU < 1 {
		budget = newCPUBudget(b.spec.CPU)
		defer budget.stop()
	}
	chunk := make([]*kafkasource.Message, 0, chunkEvents)
	for open := len(parts); open > 0; {
		open = 0
		for i := range parts {
			p := &parts[i]
			if p.next >= p.end {
				continue
			}
			if b.spec.Hold != nil {
				b.held.Store(true)
				err := b.spec.Hold(ctx)
				b.held.Store(false)
				if err != nil {
					return err
				}
			}
			chunk = chunk[:0]
			next, err := b.reader.Read(ctx, b.spec.Topic, p.partition, p.next, p.end, chunkBytes, func(m *kafkasource.Message) bool {
				chunk = append(chunk, m)
				return len(chunk) < chunkEvents
			})
			if err != nil {
				return err
			}
			p.next = next
			if len(chunk) == 0 {
				// Nothing left (records deleted by retention meanwhile).
				p.next = p.end
			}
			for _, m := range chunk {
				if lim != nil {
					if err := lim.Wait(ctx); err != nil {
						if ctxErr := ctx.Err(); ctxErr != nil {
							return ctxErr
						}
						return err
					}
				} else if err := ctx.Err(); err != nil {
					return err
				}
				c.event(m)
				b.read.Add(1)
				if budget != nil {
					if err := budget.tick(ctx); err != nil {
						return err
					}
				}
			}
			clear(chunk)
			if p.next < p.end {
				open++
			}
		}
	}
	return nil
}
