package satellite

import (
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/squallhq/squall/internal/kafkatest"
	"github.com/squallhq/squall/internal/polltest"
	"github.com/squallhq/squall/satellite/dedupe"
	"github.com/squallhq/squall/satellite/intake"
	"github.com/squallhq/squall/webhooks/webhookstest"
)

// Webhook files of the delivery tests.
const (
	// dedupeHook is signed the Standard Webhooks way and deduplicates on
	// its webhook-id header.
	dedupeHook = `{"id": "dedupe", "token": "tok-0123456789abc",
		"signature": {"scheme": "standard-webhooks", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		"dedupe": {"header": "webhook-id", "window": "1h"},
		"collector_config": {"event_type": "webhook", "payload": {"all": "${@}"}}}`
	limitedHook = `{"id": "limited", "token": "tok-0123456789abc", "rate_limit": {"rate": 0.01, "burst": 2},
		"collector_config": {"event_type": "webhook", "payload": {"all": "${@}"}}}`
	allowedHook = `{"id": "allowed", "token": "tok-0123456789abc", "allow_ips": ["192.0.2.0/24"],
		"collector_config": {"event_type": "webhook", "payload": {"all": "${@}"}}}`
)

// TestSatellite_Dedupe sends every delivery several times, some at once,
// across a restart of the satellite: Kafka gets one event per delivery id.
func TestSatellite_Dedupe(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	hooks := writeHooks(t, map[string]string{"dedupe.json": dedupeHook})
	cfg := testConfig(t, b.Addr, hooks, "")
	hook := webhookstest.Parse(t, dedupeHook)
	// send posts delivery id, signed, and returns the event id.
	send := func(s *runner, id string) string {
		body := fmt.Sprintf(`{"delivery": %q}`, id)
		h := hook.Signature.Sign([]byte(body), time.Now(), id)
		status, ev, err := postTo(s.client, s.url, "dedupe", "tok-0123456789abc", body, h)
		if err != nil || status != http.StatusOK {
			t.Errorf("delivery %s: %d %s %v", id, status, ev, err)
		}
		return ev
	}

	s := start(t, cfg)
	events := make(map[string]string) // delivery id → event id
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 5 {
		id := fmt.Sprintf("msg_%d", i)
		for range 3 { // three deliveries at once
			wg.Go(func() {
				ev := send(s, id)
				mu.Lock()
				defer mu.Unlock()
				if prev, ok := events[id]; ok && prev != ev {
					t.Errorf("delivery %s answered %s and %s", id, prev, ev)
				}
				events[id] = ev
			})
		}
	}
	wg.Wait()
	if got := metricValue(t, s, `squall_intake_deduplicated_total{webhook="dedupe"}`); got != 10 {
		t.Errorf("deduplicated = %g, want 10", got)
	}
	if got := metricValue(t, s, `squall_intake_accepted_total{webhook="dedupe"}`); got != 5 {
		t.Errorf("accepted = %g, want 5", got)
	}
	s.stop(t)
	if _, err := os.Stat(filepath.Join(cfg.Spool.Dir, dedupe.FileName)); err != nil {
		t.Errorf("no dedupe file beside the spool: %v", err)
	}

	// After a restart the window is still there.
	s = start(t, cfg)
	for i := range 5 {
		id := fmt.Sprintf("msg_%d", i)
		if ev := send(s, id); ev != events[id] {
			t.Errorf("after the restart, delivery %s answered %s, want %s", id, ev, events[id])
		}
	}
	events["msg_new"] = send(s, "msg_new")

	recs := b.Records(t, topic)
	if len(recs) != len(events) {
		t.Fatalf("%d records in Kafka, want %d (one per delivery id)", len(recs), len(events))
	}
	inKafka := make(map[string]bool)
	for _, r := range recs {
		id, _ := r.Header(intake.HeaderEventID)
		inKafka[id] = true
	}
	for d, ev := range events {
		if !inKafka[ev] {
			t.Errorf("delivery %s: event %s not in Kafka", d, ev)
		}
	}
}

// TestSatellite_RateLimitAndAddresses: 429 with Retry-After past a
// webhook's rate, 403 from an address outside allow_ips, the client address
// taken from a trusted proxy's X-Forwarded-For, the counts in /metrics, and
// a reloaded file applies at once.
func TestSatellite_RateLimitAndAddresses(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	hooks := writeHooks(t, map[string]string{"limited.json": limitedHook, "allowed.json": allowedHook})
	cfg := testConfig(t, b.Addr, hooks, "")
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	s := start(t, cfg)

	post := func(id string, header http.Header) (int, http.Header) {
		req, _ := http.NewRequest("POST", s.url+"/engine/webhook/event/"+id+"?token=tok-0123456789abc", strings.NewReader(`{}`))
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	for i := range 2 {
		if status, _ := post("limited", nil); status != http.StatusOK {
			t.Fatalf("call %d within the burst: %d", i, status)
		}
	}
	status, h := post("limited", nil)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "100" {
		t.Errorf("over the rate: %d, Retry-After %q; want 429, 100", status, h.Get("Retry-After"))
	}

	for _, tc := range []struct {
		header http.Header
		want   int
	}{
		{http.Header{"X-Forwarded-For": {"192.0.2.10"}}, http.StatusOK},
		{http.Header{"X-Forwarded-For": {"192.0.2.10, 203.0.113.1"}}, http.StatusForbidden},
		{http.Header{"Forwarded": {"for=192.0.2.10"}}, http.StatusForbidden}, // not the configured header
		{nil, http.StatusForbidden},
	} {
		if status, _ := post("allowed", tc.header); status != tc.want {
			t.Errorf("allowed with %v: %d, want %d", tc.header, status, tc.want)
		}
	}
	for metric, want := range map[string]float64{
		`squall_intake_refused_total{reason="rate",webhook="limited"}`:    1,
		`squall_intake_refused_total{reason="address",webhook="allowed"}`: 3,
		`squall_intake_accepted_total{webhook="limited"}`:                 2,
		`squall_intake_accepted_total{webhook="allowed"}`:                 1,
	} {
		if got := metricValue(t, s, metric); got != want {
			t.Errorf("%s = %g, want %g", metric, got, want)
		}
	}

	// Hot reload: a wider allow_ips and a larger burst apply to the next
	// calls.
	replace := func(name, content string) {
		tmp := filepath.Join(hooks, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(hooks, name)); err != nil {
			t.Fatal(err)
		}
	}
	replace("allowed.json", strings.Replace(allowedHook, `["192.0.2.0/24"]`, `["192.0.2.0/24", "127.0.0.0/8"]`, 1))
	replace("limited.json", strings.Replace(limitedHook, `"burst": 2`, `"burst": 5`, 1))
	polltest.Wait(t, "the reloaded files", 5*time.Second, func() bool {
		w := s.watcher.Lookup("allowed")
		l := s.watcher.Lookup("limited")
		return w != nil && len(w.AllowIPs) == 2 && l != nil && l.RateLimit.Burst == 5
	})
	if status, _ := post("allowed", nil); status != http.StatusOK {
		t.Errorf("allowed after the reload: %d", status)
	}
	if status, _ := post("limited", nil); status != http.StatusOK {
		t.Errorf("limited after the reload: %d", status)
	}
	if recs := b.Records(t, topic); len(recs) != 5 {
		t.Errorf("%d records in Kafka, want 5", len(recs))
	}
}

// metricValue reads one sample from the satellite's /metrics.
func metricValue(t testing.TB, s *runner, sample string) float64 {
	t.Helper()
	_, _, raw := s.get(t, "/metrics")
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return 0
}

// TestSatellite_BadDeliverySettings: a webhook file with an invalid
// delivery setting is skipped with a message naming the field, and the
// other webhooks are served.
func TestSatellite_BadDeliverySettings(t *testing.T) {
	t.Parallel()
	b := kafkatest.Start(t, kafkatest.Config{Topics: []string{topic}})
	bad := strings.Replace(limitedHook, `"rate": 0.01`, `"rate": -1`, 1)
	bad = strings.Replace(bad, `"id": "limited"`, `"id": "bad"`, 1)
	hooks := writeHooks(t, map[string]string{"bad.json": bad, "allowed.json": allowedHook})
	s := start(t, testConfig(t, b.Addr, hooks, ""))
	snap := s.watcher.Snapshot()
	if len(snap.Problems) != 1 || snap.Problems[0].Name != "bad.json" || !strings.Contains(snap.Problems[0].Error(), `rate_limit.rate "-1"`) {
		t.Fatalf("problems: %v", snap.Problems)
	}
	if status, _ := s.post(t, "bad", "tok-0123456789abc", `{}`, nil); status != http.StatusNotFound {
		t.Errorf("the bad webhook: %d, want 404", status)
	}
	if s.watcher.Lookup("allowed") == nil {
		t.Error("the good webhook is not served")
	}
}
