package kafkasource

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/internal/tickertest"
)

// TestSource_BrokerFreezes: a broker that stops answering with its
// connections open (SIGSTOP, a network cut) ends the member's generation
// within the session timeout, although the member keeps committing on the
// connection its heartbeats use (each commit used to push the deadline of
// the heartbeat waiting for its answer); once the broker answers again,
// the member joins again.
func TestSource_BrokerFreezes(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{testTopic}, Partitions: 2})
	w := newWriter(t, testDial(b.Addr))
	if err := w.Write(t.Context(), records(10)...); err != nil {
		t.Fatal(err)
	}
	cfg := testSourceConfig(b.Addr, "freeze")
	s := openSource(t, cfg)
	m, err := s.Fetch(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// Commit every 20 ms, as an engine at work does.
	stop := tickertest.Every(t, 20*time.Millisecond, func(ctx context.Context) {
		cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_ = s.Commit(cctx, Position{Partition: m.Partition(), Next: m.Offset() + 1})
		ccancel()
	})
	defer stop()
	polltest.Wait(t, "a generation", 10*time.Second, func() bool { return s.Assignment().Joined })

	frozen := time.Now()
	b.Freeze()
	polltest.Wait(t, "the generation to end", cfg.SessionTimeout+time.Second, func() bool { return !s.Assignment().Joined })
	t.Logf("generation ended %s after the freeze (session timeout %s)", time.Since(frozen).Round(10*time.Millisecond), cfg.SessionTimeout)
	if text, _ := s.LastError(); !strings.Contains(text, "no answer from the broker") {
		t.Errorf("last error %q, want one that says the broker does not answer", text)
	}
	b.Thaw()
	polltest.Wait(t, "the member to join again", 10*time.Second, func() bool { return s.Assignment().Joined })
}
