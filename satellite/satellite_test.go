package satellite

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/squallhq/squall/internal/calltest"
	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

func TestSatellite_Events(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	hooks := writeHooks(t, map[string]string{"plain.json": plainHook, "github.json": tenantHook})
	cfg := testConfig(t, b.Addr, hooks, "")
	// Every event goes to Kafka directly, once: a write past the test's
	// short ack timeout (a loaded machine under -race) would be spooled
	// and may reach Kafka twice (at least once).
	cfg.AckTimeout, cfg.Kafka.WriteTimeout = 10*time.Second, 10*time.Second
	s := start(t, cfg)

	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	type sent struct {
		id, key, webhook, traceparent string
		value                         string // the exact record value, created_ms aside
	}
	var want []sent
	for i := range 3 {
		status, id := s.post(t, "plain", "tok-0123456789abc", fmt.Sprintf(`{"i": %d, "big": 12345678901234567890, "s": "<&>"}`, i),
			http.Header{"Traceparent": {traceparent}})
		if status != 200 {
			t.Fatalf("plain: %d %s", status, id)
		}
		want = append(want, sent{id: id, key: "site-a", webhook: "plain", traceparent: traceparent,
			value: fmt.Sprintf(`{"type":"webhook","metadata":{"tenant_id":"site-a"},"payload":{"all":{"big":12345678901234567890,"i":%d,"s":"<&>"},"source":"test"}}`, i)})
	}
	sig := webhookstest.Parse(t, tenantHook)
	body := `{"kind": "push", "ref": "refs/heads/main", "n": 1.50}`
	status, id := s.post(t, "github", "gh-tok", body, sig.Signature.Sign([]byte(body), time.Now(), ""))
	if status != 200 {
		t.Fatalf("github: %d %s", status, id)
	}
	want = append(want, sent{id: id, key: "acme", webhook: "github",
		value: `{"type":"push","metadata":{"tenant_id":"acme"},"payload":{"n":1.50,"ref":"refs/heads/main"}}`})

	recs := b.Records(t, topic)
	if len(recs) != len(want) {
		t.Fatalf("%d records in the topic, want %d", len(recs), len(want))
	}
	byID := make(map[string]kafkatest.Record)
	for _, r := range recs {
		id, _ := r.Header(intake.HeaderEventID)
		byID[id] = r
	}
	for _, w := range want {
		r, ok := byID[w.id]
		if !ok {
			t.Fatalf("event %s is not in the topic", w.id)
		}
		if u, err := uuid.Parse(w.id); err != nil || u.Version() != 7 {
			t.Errorf("event id %s is not a UUIDv7", w.id)
		}
		if r.Key != w.key {
			t.Errorf("%s: key %q, want %q", w.id, r.Key, w.key)
		}
		var ev map[string]json.RawMessage
		json.Unmarshal(r.Value, &ev)
		var created int64
		json.Unmarshal(ev["created_ms"], &created)
		if d := time.Since(time.UnixMilli(created)); d < 0 || d > time.Minute || !r.Timestamp.Equal(time.UnixMilli(created)) {
			t.Errorf("%s: created_ms %d, record time %v", w.id, created, r.Timestamp)
		}
		got := strings.Replace(string(r.Value), fmt.Sprintf(`"created_ms":%d,`, created), "", 1)
		if got != w.value {
			t.Errorf("%s: value\n got %s\nwant %s", w.id, got, w.value)
		}
		var names []string
		for _, h := range r.Headers {
			names = append(names, h.Key)
		}
		if got := strings.Join(names, ","); got != "squall-event-id,traceparent,squall-webhook,squall-source" {
			t.Errorf("%s: headers %s", w.id, got)
		}
		tp, _ := r.Header(intake.HeaderTraceparent)
		if w.traceparent != "" && tp != w.traceparent {
			t.Errorf("%s: traceparent %q, want the caller's %q", w.id, tp, w.traceparent)
		}
		if w.traceparent == "" && (len(tp) != 55 || !strings.HasPrefix(tp, "00-")) {
			t.Errorf("%s: new traceparent %q", w.id, tp)
		}
		if v, _ := r.Header(intake.HeaderWebhook); v != w.webhook {
			t.Errorf("%s: squall-webhook %q", w.id, v)
		}
		if v, _ := r.Header(intake.HeaderSource); v != "sat-test" {
			t.Errorf("%s: squall-source %q", w.id, v)
		}
	}
	// One tenant, one partition.
	parts := map[string]int32{}
	for _, r := range recs {
		if p, ok := parts[r.Key]; ok && p != r.Partition {
			t.Errorf("tenant %s in partitions %d and %d", r.Key, p, r.Partition)
		}
		parts[r.Key] = r.Partition
	}
	if got := testutil.ToFloat64(s.fwd.m.forwarded.WithLabelValues(pathKafka)); got != 4 {
		t.Errorf("squall_forward_events_total{path=kafka} = %v, want 4", got)
	}
}

func TestSatellite_StatusCodes(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	hooks := writeHooks(t, map[string]string{"plain.json": plainHook, "github.json": tenantHook,
		"small.json": `{"id": "small", "token": "small-0123456789abc", "max_payload_size": 64, "collector_config": {"event_type": "${t}", "payload": {}}}`})
	cfg := testConfig(t, b.Addr, hooks, "")
	cfg.Kafka.MaxMessageBytes = 4 << 10
	s := start(t, cfg)
	big := `{"x": "` + strings.Repeat("a", 5000) + `"}`
	for _, tc := range []struct {
		name, id, token, body string
		header                http.Header
		status                int
		code                  string
	}{
		{"ok", "plain", "tok-0123456789abc", `{}`, nil, 200, ""},
		{"unknown", "nope", "tok-0123456789abc", `{}`, nil, 404, intake.CodeNotFound},
		{"token", "plain", "bad", `{}`, nil, 401, intake.CodeUnauthorized},
		{"signature", "github", "gh-tok", `{"kind": "push"}`, http.Header{"X-Hub-Signature-256": {"sha256=00"}}, 401, intake.CodeBadSignature},
		{"payload size", "small", "small-0123456789abc", `{"t": "` + strings.Repeat("a", 100) + `"}`, nil, 413, intake.CodePayloadTooLarge},
		{"event size", "plain", "tok-0123456789abc", big, nil, 413, intake.CodeEventTooLarge},
		{"not JSON", "plain", "tok-0123456789abc", `nope`, nil, 400, intake.CodeBodyNotJSON},
		{"template", "small", "small-0123456789abc", `{"t": 1}`, nil, 422, intake.CodeTemplate},
	} {
		status, code := s.post(t, tc.id, tc.token, tc.body, tc.header)
		if status != tc.status || (tc.code != "" && code != tc.code) {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, status, code, tc.status, tc.code)
		}
	}
	req, _ := http.NewRequest("GET", s.url+"/engine/webhook/event/plain?token=tok-0123456789abc", nil)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if recs := b.Records(t, topic); len(recs) != 1 {
		t.Errorf("%d records, want only the accepted one", len(recs))
	}
}

func TestSatellite_Ops(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	s := start(t, testConfig(t, b.Addr, writeHooks(t, map[string]string{"plain.json": plainHook, "bad.json": `{`}), ""))
	if status, _ := s.post(t, "plain", "tok-0123456789abc", `{}`, nil); status != 200 {
		t.Fatal(status)
	}
	if code, _, raw := s.get(t, "/healthz"); code != 200 || !strings.Contains(string(raw), `"ok"`) {
		t.Errorf("/healthz %d %s", code, raw)
	}
	code, st := s.readyz(t)
	if code != 200 || !st.Ready || st.Mode != "direct" || !st.Kafka.Up || st.Webhooks.Loaded != 1 || st.Webhooks.SkippedFiles != 1 || st.Spool.Full {
		t.Errorf("/readyz %d %+v", code, st)
	}
	code, hdr, raw := s.get(t, "/metrics")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics %d %s", code, hdr.Get("Content-Type"))
	}
	for _, name := range []string{
		`squall_intake_requests_total{code="200",webhook="plain"} 1`,
		`squall_forward_events_total{path="kafka"} 1`,
		"squall_kafka_up 1", "squall_spool_records 0", "squall_webhooks_loaded 1", "squall_webhooks_skipped_files 1",
		`squall_webhooks_file_errors_total{reason="invalid"} 1`, "squall_kafka_produce_duration_seconds_bucket", "squall_kafka_batch_records_bucket",
	} {
		if !strings.Contains(string(raw), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	code, hdr, raw = s.get(t, "/nowhere")
	if code != 404 || hdr.Get("Content-Type") != "application/json" || !strings.Contains(string(raw), `"NOT_FOUND"`) {
		t.Errorf("/nowhere %d %s", code, raw)
	}
}

func TestSatellite_HotReload(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	hooks := writeHooks(t, map[string]string{"plain.json": plainHook})
	s := start(t, testConfig(t, b.Addr, hooks, ""))
	if status, _ := s.post(t, "late", "late-0123456789abc", `{}`, nil); status != 404 {
		t.Fatalf("late before its file: %d", status)
	}
	// A rename-over save of a new file, as an editor writes it.
	tmp := filepath.Join(hooks, ".late.json.swp")
	os.WriteFile(tmp, []byte(`{"id": "late", "token": "late-0123456789abc", "collector_config": {"event_type": "x", "payload": {}}}`), 0o600)
	os.Rename(tmp, filepath.Join(hooks, "late.json"))
	polltest.Wait(t, "the new webhook", 5*time.Second, func() bool { return s.watcher.Lookup("late") != nil })
	if status, id := s.post(t, "late", "late-0123456789abc", `{}`, nil); status != 200 {
		t.Fatalf("late: %d %s", status, id)
	}
	// A broken edit of another file leaves the new webhook alone.
	os.WriteFile(filepath.Join(hooks, "plain.json"), []byte(`{"id": "plain", `), 0o600)
	polltest.Wait(t, "plain removed", 5*time.Second, func() bool { return s.watcher.Lookup("plain") == nil })
	if status, _ := s.post(t, "late", "late-0123456789abc", `{}`, nil); status != 200 {
		t.Fatalf("late after a broken file: %d", status)
	}
	if status, _ := s.post(t, "plain", "tok-0123456789abc", `{}`, nil); status != 404 {
		t.Fatalf("plain while broken: %d", status)
	}
	os.Remove(filepath.Join(hooks, "late.json"))
	polltest.Wait(t, "late removed", 5*time.Second, func() bool { return s.watcher.Lookup("late") == nil })
	if status, _ := s.post(t, "late", "late-0123456789abc", `{}`, nil); status != 404 {
		t.Fatalf("late after removal: %d", status)
	}
}

// load sends events from workers, each one at a time with a sequence number,
// retrying an event until it is answered 200, and records what was
// acknowledged.
type load struct {
	base    atomic.Pointer[string] // the satellite's URL; it changes on restart
	client  *http.Client
	stop    chan struct{}
	wg      sync.WaitGroup
	acked   sync.Map // "w/seq" → true
	count   atomic.Int64
	refused atomic.Int64
}

func startLoad(t *testing.T, base string, workers int) *load {
	l := &load{client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}, stop: make(chan struct{})}
	l.base.Store(&base)
	for w := range workers {
		l.wg.Go(func() {
			for seq := 0; ; {
				select {
				case <-l.stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"worker": %d, "seq": %d}`, w, seq)
				status, _, err := postTo(l.client, *l.base.Load(), "plain", "tok-0123456789abc", body, nil)
				if err == nil && status == 200 {
					l.acked.Store(fmt.Sprintf("%d/%d", w, seq), true)
					l.count.Add(1)
					seq++
					continue
				}
				// Refused (restart, spool full) or no answer: the
				// producer retries the same event, like a webhook
				// sender would.
				l.refused.Add(1)
				select {
				case <-l.stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
	t.Cleanup(l.halt)
	return l
}

func (l *load) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.client.CloseIdleConnections()
}

// TestSatellite_BrokerOutage stops the broker under steady load, restarts the
// satellite while the broker is away, brings the broker back, and checks that
// every acknowledged event is in the topic, in order per worker.
func TestSatellite_BrokerOutage(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3, DataDir: t.TempDir()})
	hooks := writeHooks(t, map[string]string{"plain.json": plainHook})
	spoolDir := t.TempDir()
	cfg := testConfig(t, b.Addr, hooks, spoolDir)
	s := start(t, cfg)
	l := startLoad(t, s.url, 4)
	atLeast := func(n int64) func() bool {
		from := l.count.Load()
		return func() bool { return l.count.Load() >= from+n }
	}

	polltest.Wait(t, "events with the broker up", 20*time.Second, atLeast(100))
	b.Stop()
	polltest.Wait(t, "the switch to the spool", 20*time.Second, func() bool { return s.fwd.spooling.Load() })
	polltest.Wait(t, "events spooled", 20*time.Second, atLeast(150))
	if _, st := s.readyz(t); !st.Ready || st.Kafka.Up || st.Mode != "spooling" || st.Spool.Records == 0 {
		t.Errorf("/readyz while Kafka is down: %+v", st)
	}

	// Restart the satellite in the middle of the outage.
	s.stop(t)
	s = start(t, cfg)
	l.base.Store(&s.url)
	if !s.fwd.spooling.Load() {
		t.Fatal("a restarted satellite with a full spool writes to Kafka directly")
	}
	polltest.Wait(t, "events spooled after the restart", 20*time.Second, atLeast(150))

	b.Restart()
	polltest.Wait(t, "the spool drained", 30*time.Second, func() bool { return !s.fwd.spooling.Load() })
	polltest.Wait(t, "events with the broker back", 20*time.Second, atLeast(100))
	l.halt()
	polltest.Wait(t, "an empty spool", 10*time.Second, func() bool { return s.spool.Stats().Records == 0 })

	recs := b.Records(t, topic)
	seen := make(map[string]int)
	firsts := make(map[int64][]int64) // worker → seqs in order of first appearance
	for _, r := range recs {
		p := eventPayload(t, r)
		w, _ := p["worker"].(json.Number).Int64()
		seq, _ := p["seq"].(json.Number).Int64()
		k := fmt.Sprintf("%d/%d", w, seq)
		if seen[k] == 0 {
			firsts[w] = append(firsts[w], seq)
		}
		seen[k]++
	}
	missing, dups := 0, 0
	l.acked.Range(func(k, _ any) bool {
		if seen[k.(string)] == 0 {
			missing++
		}
		return true
	})
	for _, n := range seen {
		dups += n - 1
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged events are not in the topic", missing, l.count.Load())
	}
	// One tenant: one partition, where each worker's events keep their
	// order (duplicates aside).
	for w, seqs := range firsts {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Fatalf("worker %d: event %d after %d", w, seqs[i], seqs[i-1])
			}
		}
	}
	t.Logf("%d acknowledged, %d records in the topic (%d duplicates), %d refused calls retried",
		l.count.Load(), len(recs), dups, l.refused.Load())
}

func TestSatellite_SpoolFull(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	b.Stop()
	cfg := testConfig(t, b.Addr, writeHooks(t, map[string]string{"plain.json": plainHook}), "")
	cfg.Kafka.MaxMessageBytes = 4 << 10
	cfg.Spool.MaxBytes = 32 << 10
	cfg.RetryAfter = 9 * time.Second
	s := start(t, cfg)
	body := `{"pad": "` + strings.Repeat("p", 1000) + `"}`
	accepted := 0
	for {
		status, code := s.post(t, "plain", "tok-0123456789abc", body, nil)
		if status == 503 {
			if code != intake.CodeSpoolFull {
				t.Fatalf("503 %s", code)
			}
			break
		}
		if status != 200 {
			t.Fatalf("%d %s", status, code)
		}
		if accepted++; accepted > 100 {
			t.Fatal("the spool never filled")
		}
	}
	resp, err := s.client.Post(s.url+"/engine/webhook/event/plain?token=tok-0123456789abc", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "9" {
		t.Fatalf("full spool: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code, st := s.readyz(t); code != 503 || st.Ready || !st.Spool.Full {
		t.Errorf("/readyz with a full spool: %d %+v", code, st)
	}

	b.Restart()
	polltest.Wait(t, "the spool drained", 20*time.Second, func() bool { return !s.fwd.spooling.Load() })
	if code, st := s.readyz(t); code != 200 || !st.Ready || st.Spool.Records != 0 {
		t.Errorf("/readyz after the drain: %d %+v", code, st)
	}
	if status, _ := s.post(t, "plain", "tok-0123456789abc", body, nil); status != 200 {
		t.Fatalf("after the drain: %d", status)
	}
	if recs := b.Records(t, topic); len(recs) < accepted+1 {
		t.Fatalf("%d records, want at least %d", len(recs), accepted+1)
	}
}

// TestSatellite_TornSpool restarts a satellite whose spool ends with a torn
// write, as a kill -9 during an append leaves it, and checks that the
// acknowledged events are delivered.
func TestSatellite_TornSpool(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	b.Stop()
	spoolDir := t.TempDir()
	cfg := testConfig(t, b.Addr, writeHooks(t, map[string]string{"plain.json": plainHook}), spoolDir)
	s := start(t, cfg)
	var ids []string
	for i := range 20 {
		status, id := s.post(t, "plain", "tok-0123456789abc", fmt.Sprintf(`{"i": %d}`, i), nil)
		if status != 200 {
			t.Fatalf("%d %s", status, id)
		}
		ids = append(ids, id)
	}
	s.stop(t)
	segs, _ := filepath.Glob(filepath.Join(spoolDir, "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no spool segment")
	}
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0x40, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, '{', '"', 't'}) // a frame cut short
	f.Close()

	b.Restart()
	s = start(t, cfg)
	polltest.Wait(t, "the spool drained", 20*time.Second, func() bool { return !s.fwd.spooling.Load() })
	got := make(map[string]bool)
	for _, r := range b.Records(t, topic) {
		id, _ := r.Header(intake.HeaderEventID)
		got[id] = true
	}
	for _, id := range ids {
		if !got[id] {
			t.Fatalf("event %s lost", id)
		}
	}
	if torn := counterValue(t, s, "squall_spool_truncated_bytes_total"); torn != 11 {
		t.Errorf("squall_spool_truncated_bytes_total = %v, want 11", torn)
	}
}

// counterValue reads a counter from the satellite's registry.
func counterValue(t *testing.T, s *runner, name string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestSatellite_SlowKafkaShutdown stops the satellite while a call waits for a
// slow broker: the call is answered (its event spooled after AckTimeout),
// the shutdown completes, and the next run delivers the event.
func TestSatellite_SlowKafkaShutdown(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	spoolDir := t.TempDir()
	cfg := testConfig(t, b.Addr, writeHooks(t, map[string]string{"plain.json": plainHook}), spoolDir)
	s := start(t, cfg)
	if status, _ := s.post(t, "plain", "tok-0123456789abc", `{"warm": true}`, nil); status != 200 {
		t.Fatal(status)
	}

	held, release := b.HoldProduce(t)
	answered := make(chan int, 1)
	var slowID string
	go func() {
		status, id, err := postTo(s.client, s.url, "plain", "tok-0123456789abc", `{"slow": true}`, nil)
		if err != nil {
			t.Error(err)
		}
		slowID = id
		answered <- status
	}()
	<-held
	stopped := make(chan struct{})
	go func() { s.stop(t); close(stopped) }()
	if status := <-answered; status != 200 {
		t.Fatalf("the call in progress during the shutdown: %d", status)
	}
	release()
	<-stopped

	s = start(t, cfg)
	polltest.Wait(t, "the spool drained", 20*time.Second, func() bool { return !s.fwd.spooling.Load() })
	found := false
	for _, r := range b.Records(t, topic) {
		if id, _ := r.Header(intake.HeaderEventID); id == slowID {
			found = true
		}
	}
	if !found {
		t.Fatalf("event %s of the call answered during the shutdown is not in the topic", slowID)
	}
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	good := Default()
	good.Webhooks.Dir = "/hooks"
	good.Kafka.Brokers = []string{"kafka:9092"}
	good.Spool.Dir = "/spool"
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"webhooks dir", func(c *Config) { c.Webhooks.Dir = "" }, "webhooks: dir: required"},
		{"brokers", func(c *Config) { c.Kafka.Brokers = nil }, "kafka: brokers"},
		{"spool dir", func(c *Config) { c.Spool.Dir = "" }, "spool: dir: required"},
		{"ack timeout", func(c *Config) { c.AckTimeout = 0 }, "ack_timeout"},
		{"backoff", func(c *Config) { c.RetryBackoffMax = time.Millisecond }, "retry_backoff_max"},
		{"spool smaller than records", func(c *Config) { c.Spool.MaxBytes = 1 << 20 }, "at least 4 records"},
		{"tls without a certificate", func(c *Config) { c.TLS = &tls.Config{} }, "tls: no certificate"},
		{"tls without a listener", func(c *Config) {
			c.HTTPAddr = ""
			c.TLS = &tls.Config{Certificates: []tls.Certificate{{}}}
		}, "tls: set without http_addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			err := c.Validate()
			var ce *ConfigError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError containing %q", err, tc.want)
			}
			if _, err := New(c, nil, nil); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	s, err := New(good, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Name == "" || s.Addr() != "" {
		t.Fatalf("name %q addr %q", s.cfg.Name, s.Addr())
	}
}

// TestSatellite_TLS: with Config.TLS the satellite serves HTTPS (HTTP/2) to
// clients that trust its CA, follows a rotated certificate, offers HTTP/1.1
// only (the client offers h2 too), and refuses plain HTTP.
func TestSatellite_TLS(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	cfg := testConfig(t, b.Addr, writeHooks(t, map[string]string{"plain.json": plainHook}), "")
	ca, certFile, keyFile := serveTLS(t, &cfg)
	s := startTLS(t, cfg, ca)

	status, id := s.post(t, "plain", "tok-0123456789abc", `{"over": "tls"}`, nil)
	if status != 200 {
		t.Fatalf("webhook over HTTPS: %d %s", status, id)
	}
	recs := b.Records(t, topic)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	if got, _ := recs[0].Header("squall-event-id"); got != id || eventPayload(t, recs[0])["over"] != "tls" {
		t.Fatalf("record %s id %q, want %q", recs[0].Value, got, id)
	}

	servedSerial := func() int64 {
		t.Helper()
		s.client.CloseIdleConnections() // a new handshake
		resp, err := s.client.Get(s.url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" || resp.TLS.NegotiatedProtocol != "http/1.1" {
			t.Fatalf("/healthz: %s %d (ALPN %q)", resp.Proto, resp.StatusCode, resp.TLS.NegotiatedProtocol)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := servedSerial(); got != 2 {
		t.Fatalf("serial %d, want 2", got)
	}
	ca.WriteLeaf(t, certFile, keyFile, 3)
	if got := servedSerial(); got != 3 {
		t.Fatalf("serial %d after rotation, want 3", got)
	}

	// Plain HTTP to the HTTPS port: the TLS handshake fails (the Go TLS
	// server answers a 400 to what looks like HTTP), and the call never
	// reaches the webhook.
	plain := calltest.Client()
	plain.Timeout = 10 * time.Second
	status, _, err := postTo(plain, "http://"+s.Addr(), "plain", "tok-0123456789abc", `{}`, nil)
	if err == nil || status == 200 {
		t.Fatalf("plain HTTP to the HTTPS listener: %d %v", status, err)
	}
	if status != 0 && status != http.StatusBadRequest {
		t.Errorf("plain HTTP: status %d, want 400 or no answer", status)
	}
	forwarded := testutil.ToFloat64(s.fwd.m.forwarded.WithLabelValues(pathKafka)) + testutil.ToFloat64(s.fwd.m.forwarded.WithLabelValues(pathSpool))
	if forwarded != 1 {
		t.Errorf("%v events forwarded, want only the HTTPS one", forwarded)
	}
}

// TestSatellite_SlowBody sends a call whose body comes after longer than the
// ack timeout, and whose produce request the broker holds for a fifth of it:
// its event still goes to Kafka, not to the spool, since the ack timeout
// counts from when the event is handed to the sink, not from the call's
// start (from which it would have passed while the request was held).
func TestSatellite_SlowBody(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}, Partitions: 3})
	cfg := testConfig(t, b.Addr, writeHooks(t, map[string]string{"plain.json": plainHook}), "")
	s := start(t, cfg)
	// The first call dials the broker and reads its metadata.
	if status, body := s.post(t, "plain", "tok-0123456789abc", `{}`, nil); status != 200 {
		t.Fatalf("first call: %d %s", status, body)
	}
	b.Cluster().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if err := b.SleepControl(func() { <-time.After(cfg.AckTimeout / 5) }); err != nil {
			return nil, err, true
		}
		return nil, nil, false
	})

	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A body larger than what the server reads before it calls the
	// handler, whose second half comes late.
	body := `{"slow": "` + strings.Repeat("x", 64<<10) + `"}`
	if _, err := fmt.Fprintf(conn, "POST /engine/webhook/event/plain?token=tok-0123456789abc HTTP/1.1\r\nHost: sat\r\nContent-Length: %d\r\n\r\n%s",
		len(body), body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * cfg.AckTimeout) // the scenario: the rest of the body comes late
	if _, err := io.WriteString(conn, body[len(body)/2:]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("slow call: %d", resp.StatusCode)
	}
	forwarded := map[string]float64{}
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "squall_forward_events_total" {
			for _, m := range mf.GetMetric() {
				forwarded[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if forwarded["kafka"] != 2 || forwarded["spool"] != 0 {
		t.Fatalf("events forwarded by path %v, want 2 to Kafka and none spooled", forwarded)
	}
}
