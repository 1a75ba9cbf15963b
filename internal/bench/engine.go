package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/squallhq/squall/satellite/kafkasink"
)

// Engine metrics read by an engine run, as the engines export them.
const (
	metricProcessed    = "squall_engine_events_processed_total"
	metricFailed       = "squall_engine_events_failed_total"
	metricDeduplicated = "squall_engine_events_deduplicated_total"
	metricLag          = "squall_engine_partition_lag"
	metricCPU          = "process_cpu_seconds_total"
	metricRSS          = "process_resident_memory_bytes"
)

// maxMetricsBytes bounds one /metrics answer.
const maxMetricsBytes = 16 << 20

// EngineConfig configures an engine run: events written to the engines'
// topic, and the engines' /metrics read until they counted them.
type EngineConfig struct {
	// Kafka is where the events go: brokers, topic, TLS, SASL.
	Kafka kafkasink.Config
	// Events is how many events to write (0: none, only measure).
	Events int64
	// Expect is how many events the engines must count (processed,
	// failed or deduplicated) for the run to end (0: Events).
	Expect int64
	// FromStart counts the engines' counters from zero (engines started
	// for this run, on a topic preloaded before) instead of from their
	// values when the run starts.
	FromStart bool
	// Keys is the number of record keys (tenants) the events are spread
	// over (default 64).
	Keys int
	// Body, when not nil, is the value of every event; by default each
	// event is a small JSON event of its own.
	Body []byte
	// Producers is the number of concurrent writes (default 4) and Batch
	// the records of each (default 1000).
	Producers int
	Batch     int
	// Metrics are the engines' /metrics URLs; none: write only.
	Metrics []string
	// Timeout bounds the whole run (default 5 minutes).
	Timeout time.Duration
	// Interval is the time between two reads of the metrics (default
	// 100 ms).
	Interval time.Duration
	// Progress, when not nil, receives a progress line every
	// ProgressInterval (default 1 s).
	Progress         io.Writer
	ProgressInterval time.Duration
}

// EngineResult is the summary of an engine run; its JSON form is what
// `squall bench engine --json` prints (docs/BENCHMARKS.md).
type EngineResult struct {
	Topic string `json:"topic"`
	// Produced is the events written and acknowledged, in
	// ProduceSeconds.
	Produced       int64   `json:"produced"`
	ProduceSeconds float64 `json:"produce_seconds"`
	ProduceRate    float64 `json:"produce_rate"`
	// Expected is the events the engines had to count; Counted is what
	// they counted (Processed + Failed + Deduplicated) since the start
	// of the run (or of the engines, with FromStart).
	Expected     int64 `json:"expected"`
	Counted      int64 `json:"counted"`
	Processed    int64 `json:"processed"`
	Failed       int64 `json:"failed"`
	Deduplicated int64 `json:"deduplicated"`
	// Complete is true when Counted reached Expected.
	Complete bool `json:"complete"`
	// DrainSeconds runs from the last read of the metrics before the
	// count rose to the first that saw Expected; DrainRate is Counted
	// over it.
	DrainSeconds float64 `json:"drain_seconds"`
	DrainRate    float64 `json:"drain_rate"`
	// BacklogRate is the rate after the last write was acknowledged:
	// the engines' rate on a backlog, not held back by the writes.
	BacklogSeconds float64 `json:"backlog_seconds"`
	BacklogRate    float64 `json:"backlog_rate"`
	// MaxLag is the largest sum of the engines' partition lags seen.
	MaxLag int64 `json:"max_lag"`
	// CPUMicrosPerEvent is the engines' process CPU during the drain per
	// event counted.
	CPUMicrosPerEvent float64 `json:"cpu_us_per_event"`
	// Engines are the figures of each engine.
	Engines []EngineFigures `json:"engines"`
}

// EngineFigures are one engine's figures in a run.
type EngineFigures struct {
	// Metrics is the URL read.
	Metrics string `json:"metrics"`
	// Counted is the events this engine counted.
	Counted int64 `json:"counted"`
	// CPUSeconds is its process CPU during the drain.
	CPUSeconds float64 `json:"cpu_seconds"`
	// MaxRSSBytes is the largest resident memory seen.
	MaxRSSBytes int64 `json:"max_rss_bytes"`
}

// Engine is a configured engine run.
type Engine struct {
	cfg    EngineConfig
	client *http.Client
}

// NewEngine checks cfg and fills in its defaults.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.Keys == 0 {
		cfg.Keys = 64
	}
	if cfg.Producers == 0 {
		cfg.Producers = 4
	}
	if cfg.Batch == 0 {
		cfg.Batch = 1000
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.ProgressInterval == 0 {
		cfg.ProgressInterval = time.Second
	}
	if cfg.Expect == 0 {
		cfg.Expect = cfg.Events
	}
	switch {
	case cfg.Events < 0:
		return nil, &ConfigError{"events", errors.New("must not be negative")}
	case cfg.Expect < 0:
		return nil, &ConfigError{"expect", errors.New("must not be negative")}
	case cfg.Events == 0 && len(cfg.Metrics) == 0:
		return nil, &ConfigError{"metrics", errors.New("needed when no events are written")}
	case cfg.Expect == 0 && len(cfg.Metrics) > 0:
		return nil, &ConfigError{"expect", errors.New("needed when no events are written")}
	case cfg.Keys < 1:
		return nil, &ConfigError{"keys", errors.New("must be at least 1")}
	case cfg.Producers < 1 || cfg.Producers > 64:
		return nil, &ConfigError{"producers", errors.New("must be 1 to 64")}
	case cfg.Batch < 1 || cfg.Batch > 100_000:
		return nil, &ConfigError{"batch", errors.New("must be 1 to 100000")}
	case cfg.Timeout < 0:
		return nil, &ConfigError{"timeout", errors.New("must be positive")}
	}
	for _, u := range cfg.Metrics {
		if _, err := parseTarget(u); err != nil {
			return nil, &ConfigError{"metrics", err}
		}
	}
	if cfg.Events > 0 {
		if err := cfg.Kafka.Validate(); err != nil {
			return nil, &ConfigError{"kafka", err}
		}
	}
	return &Engine{cfg: cfg, client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// sample is one read of every engine's metrics.
type sample struct {
	at      time.Time
	counted int64
	engines []engineSample
	lag     int64
}

type engineSample struct {
	processed, failed, deduplicated int64
	cpu                             float64
	rss                             int64
}

func (s engineSample) counted() int64 { return s.processed + s.failed + s.deduplicated }

// Run writes the events, then reads the metrics until the engines counted
// Expect events or Timeout passed. The error is nil when the run completed
// or ended early with ctx (the result then says how far it got).
func (e *Engine) Run(ctx context.Context) (*EngineResult, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	r := &EngineResult{Topic: e.cfg.Kafka.Topic, Expected: e.cfg.Expect}
	var base sample
	if len(e.cfg.Metrics) > 0 && !e.cfg.FromStart {
		s, err := e.scrape(ctx)
		if err != nil {
			return nil, err
		}
		base = s
	} else {
		base.engines = make([]engineSample, len(e.cfg.Metrics))
	}

	var produced atomic.Int64
	produceDone := make(chan error, 1)
	start := time.Now()
	if e.cfg.Events > 0 {
		go func() { produceDone <- e.produce(ctx, &produced) }()
	}

	var (
		first, last  sample // last read before the count rose; latest read
		atProduceEnd sample
		rose         bool
		rss          = make([]int64, len(e.cfg.Metrics))
		err          error
	)
	first, last = base, base
	first.at, last.at = start, start
	tick := time.NewTicker(e.cfg.Interval)
	defer tick.Stop()
	nextProgress := start.Add(e.cfg.ProgressInterval)
	prevProgress, prevProduced, prevCounted := start, int64(0), int64(0)
	producing := e.cfg.Events > 0
	for {
		if producing {
			select {
			case err = <-produceDone:
				producing = false
				produceEnd := time.Now()
				r.Produced = produced.Load()
				r.ProduceSeconds = produceEnd.Sub(start).Seconds()
				if r.ProduceSeconds > 0 {
					r.ProduceRate = float64(r.Produced) / r.ProduceSeconds
				}
				if err != nil {
					err = fmt.Errorf("write events: %w", err)
				}
				if len(e.cfg.Metrics) == 0 || err != nil {
					return r, err
				}
			case <-tick.C:
			}
		} else {
			select {
			case <-ctx.Done():
				goto done
			case <-tick.C:
			}
		}
		if len(e.cfg.Metrics) > 0 {
			s, serr := e.scrape(ctx)
			if serr != nil {
				if ctx.Err() != nil {
					goto done
				}
				return r, serr
			}
			s.counted -= base.counted
			for i := range s.engines {
				rss[i] = max(rss[i], s.engines[i].rss)
			}
			r.MaxLag = max(r.MaxLag, s.lag)
			if !rose && s.counted > 0 {
				rose = true
			}
			if !rose {
				first = s
			}
			last = s
			if !producing && atProduceEnd.at.IsZero() {
				atProduceEnd = s
			}
			if s.counted >= e.cfg.Expect && !producing {
				r.Complete = true
				goto done
			}
		}
		if now := time.Now(); e.cfg.Progress != nil && !now.Before(nextProgress) {
			p, c := produced.Load(), last.counted
			secs := now.Sub(prevProgress).Seconds()
			fmt.Fprintf(e.cfg.Progress, "%5.0fs  written %d (%.0f/s)  counted %d (%.0f/s)  lag %d\n",
				now.Sub(start).Seconds(), p, float64(p-prevProduced)/secs, c, float64(c-prevCounted)/secs, last.lag)
			prevProgress, prevProduced, prevCounted = now, p, c
			nextProgress = nextProgress.Add(e.cfg.ProgressInterval)
			if nextProgress.Before(now) {
				nextProgress = now.Add(e.cfg.ProgressInterval)
			}
		}
	}
done:
	if producing {
		// Ended by ctx while writing: wait for the writers to stop.
		err = <-produceDone
		r.Produced = produced.Load()
		r.ProduceSeconds = time.Since(start).Seconds()
	}
	r.Counted = last.counted
	var cpu float64
	for i, en := range last.engines {
		b := base.engines[i]
		f := first.engines[i]
		fig := EngineFigures{
			Metrics:     e.cfg.Metrics[i],
			Counted:     en.counted() - b.counted(),
			CPUSeconds:  en.cpu - f.cpu,
			MaxRSSBytes: rss[i],
		}
		r.Processed += en.processed - b.processed
		r.Failed += en.failed - b.failed
		r.Deduplicated += en.deduplicated - b.deduplicated
		cpu += fig.CPUSeconds
		r.Engines = append(r.Engines, fig)
	}
	if d := last.at.Sub(first.at).Seconds(); rose && d > 0 {
		r.DrainSeconds = d
		r.DrainRate = float64(last.counted-first.counted) / d
	}
	if d := last.at.Sub(atProduceEnd.at).Seconds(); !atProduceEnd.at.IsZero() && d > 0 {
		r.BacklogSeconds = d
		r.BacklogRate = float64(last.counted-atProduceEnd.counted) / d
	}
	if n := last.counted - first.counted; n > 0 {
		r.CPUMicrosPerEvent = cpu * 1e6 / float64(n)
	}
	if err != nil && ctx.Err() == nil {
		return r, err
	}
	return r, nil
}

// produce writes Events events with Producers concurrent writes of Batch
// records, counting the acknowledged ones in n.
func (e *Engine) produce(ctx context.Context, n *atomic.Int64) error {
	sink, err := kafkasink.New(e.cfg.Kafka, nil, nil)
	if err != nil {
		return err
	}
	defer sink.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, e.cfg.Producers)
	keys := make([][]byte, e.cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "bench-%d", i)
	}
	created := strconv.AppendInt(nil, time.Now().UnixMilli(), 10)
	for w := range e.cfg.Producers {
		wg.Go(func() {
			msgs := make([]kafkasink.Message, 0, e.cfg.Batch)
			for ctx.Err() == nil {
				from := next.Add(int64(e.cfg.Batch)) - int64(e.cfg.Batch)
				if from >= e.cfg.Events {
					return
				}
				to := min(from+int64(e.cfg.Batch), e.cfg.Events)
				msgs = msgs[:0]
				now := time.Now()
				for i := from; i < to; i++ {
					key := keys[i%int64(len(keys))]
					id, err := uuid.NewV7()
					if err != nil {
						errs[w] = err
						return
					}
					value := e.cfg.Body
					if value == nil {
						value = appendEvent(nil, key, created, i)
					}
					msgs = append(msgs, kafkasink.Message{Key: key, Value: value, Time: now, Headers: []kafkasink.Header{
						{Key: "squall-event-id", Value: []byte(id.String())},
						{Key: "squall-source", Value: []byte("squall-bench")},
					}})
				}
				if err := sink.Write(ctx, msgs...); err != nil {
					errs[w] = err
					return
				}
				n.Add(to - from)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// appendEvent appends the default event i of tenant key.
func appendEvent(b, key, created []byte, i int64) []byte {
	b = append(b, `{"type":"squall_bench","created_ms":`...)
	b = append(b, created...)
	b = append(b, `,"metadata":{"tenant_id":"`...)
	b = append(b, key...)
	b = append(b, `"},"payload":{"host":"squall-bench","message":"squall bench engine","n":`...)
	b = strconv.AppendInt(b, i, 10)
	return append(b, "}}"...)
}

// scrape reads every engine's metrics.
func (e *Engine) scrape(ctx context.Context) (sample, error) {
	s := sample{engines: make([]engineSample, len(e.cfg.Metrics))}
	for i, u := range e.cfg.Metrics {
		en, lag, err := e.scrapeOne(ctx, u)
		if err != nil {
			return s, err
		}
		s.engines[i] = en
		s.counted += en.counted()
		s.lag += lag
	}
	s.at = time.Now()
	return s, nil
}

// scrapeOne reads one engine's metrics.
func (e *Engine) scrapeOne(ctx context.Context, u string) (engineSample, int64, error) {
	var s engineSample
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return s, 0, fmt.Errorf("metrics %s: %w", u, err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := e.client.Do(req)
	if err != nil {
		return s, 0, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, 0, fmt.Errorf("metrics %s: status %d", u, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return s, 0, fmt.Errorf("metrics %s: %w", u, err)
	}
	if families[metricProcessed] == nil {
		return s, 0, fmt.Errorf("metrics %s: no %s: is it an engine's?", u, metricProcessed)
	}
	s.processed = int64(sum(families[metricProcessed]))
	s.failed = int64(sum(families[metricFailed]))
	s.deduplicated = int64(sum(families[metricDeduplicated]))
	s.cpu = sum(families[metricCPU])
	s.rss = int64(sum(families[metricRSS]))
	return s, int64(sum(families[metricLag])), nil
}

// sum adds up the values of a counter or gauge family (0 when absent).
func sum(f *dto.MetricFamily) float64 {
	if f == nil {
		return 0
	}
	var v float64
	for _, m := range f.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			v += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v
}

// WriteText writes r as a table.
func (r *EngineResult) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, `topic        %s
written      %d in %.2fs (%.0f events/s)
expected     %d
counted      %d (processed %d, failed %d, deduplicated %d), complete: %t
drain        %.0f events/s over %.2fs
backlog      %.0f events/s over %.2fs after the last write
max lag      %d
engine CPU   %.2f µs/event
`, r.Topic, r.Produced, r.ProduceSeconds, r.ProduceRate, r.Expected, r.Counted, r.Processed, r.Failed,
		r.Deduplicated, r.Complete, r.DrainRate, r.DrainSeconds, r.BacklogRate, r.BacklogSeconds, r.MaxLag, r.CPUMicrosPerEvent)
	if err != nil {
		return err
	}
	for _, en := range r.Engines {
		if _, err := fmt.Fprintf(w, "  %s: counted %d, CPU %.2fs, max RSS %.1f MiB\n",
			en.Metrics, en.Counted, en.CPUSeconds, float64(en.MaxRSSBytes)/(1<<20)); err != nil {
			return err
		}
	}
	return nil
}
