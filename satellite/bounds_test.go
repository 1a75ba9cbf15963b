package satellite

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/satellite/internal/floodtest"
)

// Figures of TestSatellite_Flood (docs/operations.md, "Bounds of the
// intake").
const (
	satFloodClients   = 96
	satFloodAttempts  = 3
	satFloodBodySize  = 64 << 10
	satFloodHeapBound = 12 << 20 // heap in use above the baseline, after GC
)

// TestSatellite_Flood: a satellite whose Kafka holds every produce request
// takes a flood of large calls on its own listener. Calls over its bounds
// (connections, calls, bytes held for Kafka) are answered 503 OVERLOADED
// with Retry-After, the heap in use stays under satFloodHeapBound, and once
// Kafka answers, every call answered 200 has its record in the topic. Not
// parallel: the heap is the flood's alone.
func TestSatellite_Flood(t *testing.T) {
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 1})
	hook := fmt.Sprintf(`{"id": "big", "token": "tok-0123456789abc", "max_payload_size": %d,
		"collector_config": {"event_type": "flood", "payload": {"all": "${@}"}}}`, 2*satFloodBodySize)
	cfg := testConfig(t, b.Addr, writeHooks(t, map[string]string{"big.json": hook}), "")
	cfg.AckTimeout = 20 * time.Second // the flood's calls wait for Kafka meanwhile
	cfg.RetryAfter = 7 * time.Second
	cfg.MaxConnections, cfg.MaxCalls, cfg.MaxPendingBytes = 48, 24, 1<<20
	r := start(t, cfg)
	if status, id := r.post(t, "big", "tok-0123456789abc", `{"n": -1}`, nil); status != http.StatusOK {
		t.Fatalf("first call: %d %s", status, id)
	}

	// From now on the broker holds every produce request until release.
	c := b.Cluster()
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case <-release:
		default:
			if err := b.SleepControl(func() { <-release }); err != nil {
				return nil, err, true
			}
		}
		return nil, nil, false
	})

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: satFloodClients}, Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()
	flood := floodtest.Start(client, floodtest.Config{URL: r.url + "/engine/webhook/event/big?token=tok-0123456789abc",
		Clients: satFloodClients, Attempts: satFloodAttempts, BodySize: satFloodBodySize})

	// The peak: every client is done or has a call waiting for Kafka.
	inFlight := func() int {
		// From the registry: /metrics may be over the connection bound.
		mfs, err := r.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "squall_intake_in_flight_requests" {
				return int(mf.GetMetric()[0].GetGauge().GetValue())
			}
		}
		t.Fatal("no squall_intake_in_flight_requests")
		return 0
	}
	finished := 0
	polltest.Wait(t, "the flood to settle", 60*time.Second, func() bool {
		for {
			select {
			case <-flood.Settled():
				finished++
				continue
			default:
			}
			return finished+inFlight() == satFloodClients
		}
	})
	peak := flood.HeapGrowth()
	waiting := inFlight()
	unblock()
	acked, refused := floodtest.Tally(t, flood.Wait(), intake.CodeOverloaded, "7")
	t.Logf("%d clients × %d attempts of %d KiB: %d answered 200, %d 503 OVERLOADED; at the peak %d calls waited for Kafka; heap in use +%.1f MiB (bound %d MiB)",
		satFloodClients, satFloodAttempts, satFloodBodySize>>10, len(acked), refused, waiting, float64(peak)/(1<<20), satFloodHeapBound>>20)
	if refused == 0 || len(acked) == 0 {
		t.Errorf("%d answered 200, %d refused: want both", len(acked), refused)
	}
	if peak > satFloodHeapBound {
		t.Errorf("heap in use grew by %d bytes during the flood, bound %d", peak, satFloodHeapBound)
	}

	// Every event answered 200 is in the topic.
	var records []kafkatest.Record
	polltest.Wait(t, "the accepted events in Kafka", 30*time.Second, func() bool {
		records = b.Records(t, topic)
		return len(records) >= len(acked)+1
	})
	inTopic := map[string]bool{}
	for _, rec := range records {
		id, _ := rec.Header(intake.HeaderEventID)
		inTopic[id] = true
	}
	for _, id := range acked {
		if !inTopic[id] {
			t.Errorf("event %s answered 200 is not in Kafka", id)
		}
	}
}

// TestSatellite_MaxConnectionsTLS: over HTTPS, a connection over
// MaxConnections is answered 503 OVERLOADED with Retry-After after the
// handshake, and closed.
func TestSatellite_MaxConnectionsTLS(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	cfg := testConfig(t, b.Addr, writeHooks(t, map[string]string{"plain.json": plainHook}), "")
	ca, _, _ := serveTLS(t, &cfg)
	cfg.MaxConnections = 1
	cfg.RetryAfter = 7 * time.Second
	s := startTLS(t, cfg, ca)
	// The first client keeps its connection open (kept alive).
	if status, id := s.post(t, "plain", "tok-0123456789abc", `{}`, nil); status != http.StatusOK {
		t.Fatalf("first connection: %d %s", status, id)
	}
	resp, err := ca.Client(t).Post(s.url+"/engine/webhook/event/plain?token=tok-0123456789abc", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" || !resp.Close ||
		!bytes.Contains(raw, []byte(`"code":"OVERLOADED"`)) {
		t.Fatalf("second connection: %d %v %s", resp.StatusCode, resp.Header, raw)
	}
	if n := testutil.ToFloat64(s.m.connsRefused); n != 1 {
		t.Fatalf("squall_intake_connections_refused_total = %v, want 1", n)
	}
}
