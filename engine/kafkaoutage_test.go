package engine

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/engine/kafkasource"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/internal/tickertest"
)

// TestService_KafkaOutage stops the broker under load, as a broker process
// that dies, and freezes it, as one stopped with SIGSTOP or cut off by the
// network, and starts it again: the engine is not ready, with a reason
// that names Kafka, within the session timeout of losing the broker, and
// a member of the group again within a few seconds of its return; every
// event the producer had acknowledged is processed. The engine runs with
// the production Kafka timings (heartbeat 1 s, session timeout 6 s). The
// figures are in docs/RELIABILITY.md.
func TestService_KafkaOutage(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{broker: kafkatest.Config{Partitions: 3, DataDir: t.TempDir()}})
	e.deploy("v1")
	cfg := e.config()
	cfg.Kafka = KafkaTuning{MaxWait: cfg.Kafka.MaxWait} // the production timings otherwise
	r := startReady(t, cfg)
	acked := e.load(t)

	const (
		session = kafkasource.DefaultSessionTimeout
		// rejoin bounds the time from the broker's return to the
		// engine's readiness: the join backoff (1 s), the removal of
		// the member the engine was before the stop (the broker
		// restored the group with it, and the join waits for it
		// otherwise), the join itself, and room for a busy machine.
		// kafka-go's own backoff was 5 s.
		rejoin = 4 * time.Second
		// slack is the room for the polls of the test and a busy
		// machine.
		slack = time.Second
	)
	notReady := func(what string, lost time.Time) {
		t.Helper()
		polltest.Wait(t, "the engine not ready after "+what, session+slack, func() bool { return !r.Ready() })
		t.Logf("%s: not ready %s after", what, time.Since(lost).Round(10*time.Millisecond))
		polltest.Wait(t, "a reason that names Kafka", readyTimeout, func() bool {
			code, st := r.readyz()
			return code == http.StatusServiceUnavailable && len(st.Reasons) == 1 && strings.Contains(st.Reasons[0], "Kafka")
		})
	}
	// failedAgain waits for an attempt to join that fails after the one
	// seen so far: the broker then comes back at the start of the wait
	// for the next attempt, the worst moment.
	failedAgain := func() {
		t.Helper()
		_, before := r.source.Load().LastError()
		polltest.Wait(t, "a failed attempt to join", readyTimeout, func() bool {
			text, at := r.source.Load().LastError()
			return at.After(before) && strings.Contains(text, "consumer group")
		})
	}
	ready := func(what string, back time.Time) {
		t.Helper()
		polltest.Wait(t, "the engine in the group again after "+what, rejoin, r.Ready)
		t.Logf("%s: ready %s after the broker's return", what, time.Since(back).Round(10*time.Millisecond))
		e.waitSome(acked)
		t.Logf("%s: new events processed %s after the broker's return", what, time.Since(back).Round(10*time.Millisecond))
	}

	// The broker dies: its connections close.
	e.waitSome(acked)
	lost := time.Now()
	e.broker.Stop()
	notReady("a stop", lost)
	failedAgain()
	failedAgain()
	back := time.Now()
	e.broker.Restart()
	ready("a stop", back)
	if l := r.log.String(); !strings.Contains(l, "consumer group joined again") {
		t.Error("no summary line \"consumer group joined again\" in the log")
	}

	// The broker freezes: its connections stay open, unanswered, while
	// the engine commits what it finished.
	lost = time.Now()
	e.broker.Freeze()
	notReady("a freeze", lost)
	back = time.Now()
	e.broker.Thaw()
	ready("a freeze", back)

	e.waitArchived(acked.stop())
}

// producer writes batches of events until stopped, and keeps those the
// broker acknowledged.
type producer struct {
	stopLoad func()
	mu       sync.Mutex
	acked    []event
}

// load starts writing 20 events every 20 ms; it stops at the end of the
// test at the latest.
func (e *env) load(t testing.TB) *producer {
	p := &producer{}
	p.stopLoad = tickertest.Every(t, 20*time.Millisecond, func(ctx context.Context) {
		evs := orders(20, 5)
		recs := make([]kafkasource.Record, len(evs))
		for i, ev := range evs {
			recs[i] = ev.record()
		}
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
		err := e.writer.Write(wctx, recs...)
		wcancel()
		if err == nil {
			p.mu.Lock()
			p.acked = append(p.acked, evs...)
			p.mu.Unlock()
		}
	})
	return p
}

// stop stops writing and returns the acknowledged events.
func (p *producer) stop() []event {
	p.stopLoad()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// waitSome waits until the engine processed events written since the
// call: the load goes on.
func (e *env) waitSome(p *producer) {
	e.t.Helper()
	p.mu.Lock()
	n := len(p.acked)
	p.mu.Unlock()
	polltest.Wait(e.t, "more events acknowledged", readyTimeout, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.acked) >= n+100
	})
	p.mu.Lock()
	evs := p.acked[n : n+100]
	p.mu.Unlock()
	e.waitArchived(evs)
}
